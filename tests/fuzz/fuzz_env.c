/*
 * fuzz_env.c — libFuzzer target: the text weft takes from the environment.
 *
 * Input: byte 0 picks the parser, the rest is the text; where a parser reads
 * several variables, NUL bytes separate their values (a missing one is
 * unset). Every value goes through the real variable and weft_env_reset(),
 * as a user's setting would, except where noted.
 *
 *   0  integers: weft_env_parse_int directly (a value it accepts must print
 *      and parse back to itself) and through a knob (WEFT_SLOTS).
 *   1  logging: NCCL_DEBUG, NCCL_DEBUG_SUBSYS (lists, '^', unknown names)
 *      and NCCL_DEBUG_FILE's %h/%p/%% expansion. The file pattern is put
 *      under a directory that does not exist, with '/' replaced, so no
 *      file is ever created; log lines go to /dev/null.
 *   2  NCCL_SOCKET_IFNAME ('^' excludes, '=' exact, prefix lists) and
 *      NCCL_SOCKET_FAMILY, through weft_socket_find_interface.
 *   3  NCCL_ALGO, through weft_tuner_parse_algos: masks only name real
 *      algorithms.
 *   4  WEFT_TUNE_FILE: the text is the file. tune_file.c reads its file once
 *      per process, so it is included here and its loader run per input;
 *      loaded constants must be positive and finite.
 *   5  NCCL_COMM_ID (host:port, [v6]:port): weft_socket_parse_addr and
 *      weft_rendezvous_id_from_addr; an address that parses must print and
 *      parse back to the same family and port. Host names that would go to
 *      DNS are skipped (not a parse path worth a network query per input).
 */
#include "tune_file.c"  // IWYU pragma: keep (static load, links)

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"
#include "env.h"
#include "fuzz_common.h"
#include "rendezvous.h"
#include "socket.h"
#include "tuner.h"

static char tune_path[] = "/tmp/weft-fuzz-tune-XXXXXX";
static int tune_fd = -1;

static void cleanup(void) { unlink(tune_path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup_process();
  tune_fd = mkstemp(tune_path);
  if (tune_fd < 0) {
    perror("fuzz_env: mkstemp");
    abort();
  }
  close(tune_fd);
  atexit(cleanup);
  return 0;
}

// The i-th NUL-separated field of text[0..len), or NULL when there is none.
static const char *field(const char *text, size_t len, int i) {
  size_t at = 0;
  for (; i > 0; i--) {
    const char *nul = memchr(text + at, '\0', len - at);
    if (nul == NULL) return NULL;
    at = (size_t)(nul - text) + 1;
  }
  return at < len ? text + at : NULL;
}

static void set_or_unset(const char *name, const char *value) {
  if (value != NULL) setenv(name, value, 1);
  else unsetenv(name);
}

static void fuzz_int(const char *text) {
  int64_t v = 0, back = 0;
  if (weft_env_parse_int(text, &v) == 0) {
    char printed[32];
    snprintf(printed, sizeof(printed), "%" PRId64, v);
    if (weft_env_parse_int(printed, &back) != 0 || back != v) {
      fprintf(stderr, "fuzz_env: '%s' parsed as %" PRId64 " does not parse back\n", text, v);
      abort();
    }
  }
  setenv("WEFT_SLOTS", text, 1);
  weft_env_reset();
  (void)weft_env_WEFT_SLOTS();
  unsetenv("WEFT_SLOTS");
}

static void fuzz_debug(const char *text, size_t len) {
  const char *pattern = field(text, len, 2);
  char file[PATH_MAX];
  if (pattern != NULL) {
    int n = snprintf(file, sizeof(file), "/nonexistent-weft-fuzz/%s", pattern);
    for (char *p = file + strlen("/nonexistent-weft-fuzz/"); n > 0 && *p; p++)
      if (*p == '/') *p = '_';
  }
  set_or_unset("NCCL_DEBUG", field(text, len, 0));
  set_or_unset("NCCL_DEBUG_SUBSYS", field(text, len, 1));
  set_or_unset("NCCL_DEBUG_FILE", pattern != NULL ? file : NULL);
  weft_env_reset();
  weft_debug_init();
  INFO(WEFT_LOG_INIT, "fuzz line %d", 1);
  TRACE(WEFT_LOG_NET, "fuzz line %d", 2);
  weft_debug_log(WEFT_LEVEL_WARN, WEFT_LOG_ALL, __FILE__, __LINE__, "fuzz warning %s", "text");
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG_FILE");
  weft_env_reset();
}

static void fuzz_ifname(const char *text, size_t len) {
  set_or_unset("NCCL_SOCKET_IFNAME", field(text, len, 0));
  set_or_unset("NCCL_SOCKET_FAMILY", field(text, len, 1));
  weft_env_reset();
  weft_sockaddr_t addr;
  char name[64];
  if (weft_socket_find_interface(&addr, name, sizeof(name)) == ncclSuccess &&
      addr.sa.sa_family != AF_INET && addr.sa.sa_family != AF_INET6)
    abort();
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  unsetenv("NCCL_SOCKET_FAMILY");
}

static void fuzz_algo(const char *text) {
  unsigned masks[WEFT_NUM_COLLS];
  weft_tuner_parse_algos(text, masks);
  for (int c = 0; c < WEFT_NUM_COLLS; c++)
    if (masks[c] & ~((1u << WEFT_NUM_ALGOS) - 1)) abort();
}

static void fuzz_tune_file(const uint8_t *data, size_t size) {
  FILE *f = fopen(tune_path, "wb");
  if (f == NULL) abort();
  fwrite(data, 1, size, f);
  fclose(f);
  setenv("WEFT_TUNE_FILE", tune_path, 1);
  weft_env_reset();
  links = (weft_links_t)WEFT_LINKS_DEFAULT;
  load();
  const weft_link_t *l[2] = {&links.intra, &links.inter};
  for (int i = 0; i < 2; i++)
    if (!isfinite(l[i]->alpha) || l[i]->alpha < 0 || !isfinite(l[i]->bandwidth) || l[i]->bandwidth <= 0) abort();
  unsetenv("WEFT_TUNE_FILE");
}

// Would weft_socket_parse_addr hand this host to the resolver?
static int needs_dns(const char *text) {
  if (text[0] == '[') return 0;
  const char *colon = strrchr(text, ':');
  for (const char *p = text; colon != NULL && p < colon; p++)
    if (!((*p >= '0' && *p <= '9') || *p == '.')) return 1;
  return 0;
}

static void fuzz_comm_id(const char *text) {
  if (needs_dns(text)) return;
  weft_sockaddr_t addr, again;
  if (weft_socket_parse_addr(text, &addr) == ncclSuccess) {
    char printed[WEFT_ADDR_STRLEN];
    weft_socket_addr_str(&addr, printed, sizeof(printed));
    if (weft_socket_parse_addr(printed, &again) != ncclSuccess || again.sa.sa_family != addr.sa.sa_family ||
        (addr.sa.sa_family == AF_INET ? again.sin.sin_port != addr.sin.sin_port
                                      : again.sin6.sin6_port != addr.sin6.sin6_port)) {
      fprintf(stderr, "fuzz_env: '%s' printed as '%s' does not parse back\n", text, printed);
      abort();
    }
  }
  ncclUniqueId uid;
  if (weft_rendezvous_id_from_addr(text, &uid) == ncclSuccess) {
    weft_id_t id;
    if (weft_id_decode(&uid, &id) != ncclSuccess || !(id.flags & WEFT_ID_HOSTED_BY_RANK0)) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 2048) return 0;
  // The text as a C string (stops at the first NUL) and with its NULs.
  char *text = malloc(size);
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  size_t len = size - 1;
  switch (data[0] % 6) {
    case 0: fuzz_int(text); break;
    case 1: fuzz_debug(text, len); break;
    case 2: fuzz_ifname(text, len); break;
    case 3: fuzz_algo(text); break;
    case 4: fuzz_tune_file(data + 1, size - 1); break;
    default: fuzz_comm_id(text); break;
  }
  free(text);
  return 0;
}
