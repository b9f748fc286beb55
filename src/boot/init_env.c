/*
 * init_env.c — communicator creation from the process environment, and the
 * text form of ncclUniqueId.
 *
 * weftInitFromEnv lets a program start the same way under every launcher:
 * weftrun (WEFT_UNIQUE_ID + WEFT_RANK + WEFT_NRANKS), torchrun (RANK,
 * WORLD_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS), Open MPI
 * (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE) and PMI (PMI_RANK, PMI_SIZE).
 * Without a weftrun id, the ranks meet at NCCL_COMM_ID, or at
 * MASTER_ADDR:(MASTER_PORT + WEFT_MASTER_PORT_OFFSET), hosted by rank 0.
 * Every malformed variable is an ncclInvalidArgument with a WARN that names
 * it, so a misconfigured job fails at once instead of hanging in bootstrap.
 *
 * The unique id travels between processes as exactly 256 lowercase hex
 * digits (2 per byte of the 128-byte id).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "weft.h"

#include "api.h"
#include "debug.h"
#include "env.h"
#include "rendezvous.h"

#define HEX_DIGITS (2 * NCCL_UNIQUE_ID_BYTES)

_Static_assert(WEFT_UNIQUE_ID_STRLEN == HEX_DIGITS + 1, "hex form: 2 digits per byte + NUL");

// A launcher is recognised by its rank variable; its size variable must then
// be set too. Order is priority: the first launcher found wins.
typedef struct {
  const char *name;
  const char *rank_var;
  const char *size_var;
} weft_launcher_t;

static const weft_launcher_t launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI", "PMI_RANK", "PMI_SIZE"},
};

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

WEFT_API(ncclResult_t, weftUniqueIdToString, const ncclUniqueId *id, char *buf, size_t len);
ncclResult_t weftUniqueIdToString(const ncclUniqueId *id, char *buf, size_t len) {
  static const char digits[] = "0123456789abcdef";
  if (id == NULL) {
    WARN("weftUniqueIdToString: id is NULL");
    return ncclInvalidArgument;
  }
  if (buf == NULL) {
    WARN("weftUniqueIdToString: buf is NULL");
    return ncclInvalidArgument;
  }
  if (len < WEFT_UNIQUE_ID_STRLEN) {
    WARN("weftUniqueIdToString: len=%zu is too small, need WEFT_UNIQUE_ID_STRLEN=%d",
         len, WEFT_UNIQUE_ID_STRLEN);
    return ncclInvalidArgument;
  }
  const unsigned char *bytes = (const unsigned char *)id->internal;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
    buf[2 * i] = digits[bytes[i] >> 4];
    buf[2 * i + 1] = digits[bytes[i] & 0xf];
  }
  buf[HEX_DIGITS] = '\0';
  return ncclSuccess;
}

// Hex text -> id. On failure returns -1 with the problem in `why`, which
// names lengths and positions, never the text: an id may carry the job's secret.
static int decode_hex(const char *str, ncclUniqueId *id, char *why, size_t len) {
  size_t n = strnlen(str, HEX_DIGITS + 1);
  if (n != HEX_DIGITS) {
    snprintf(why, len, "has %s%zu characters, expected %d hex digits",
             n > HEX_DIGITS ? "more than " : "", n > HEX_DIGITS ? (size_t)HEX_DIGITS : n,
             HEX_DIGITS);
    return -1;
  }
  ncclUniqueId out = {{0}};
  for (int i = 0; i < HEX_DIGITS; i += 2) {
    int hi = hex_value(str[i]), lo = hex_value(str[i + 1]);
    if (hi < 0 || lo < 0) {
      int pos = hi < 0 ? i : i + 1;
      unsigned char c = (unsigned char)str[pos];
      if (c >= 0x20 && c < 0x7f)
        snprintf(why, len, "has '%c' at character %d, not a hex digit", c, pos);
      else
        snprintf(why, len, "has byte 0x%02x at character %d, not a hex digit", c, pos);
      return -1;
    }
    out.internal[i / 2] = (char)(hi << 4 | lo);
  }
  *id = out;
  return 0;
}

WEFT_API(ncclResult_t, weftUniqueIdFromString, const char *str, ncclUniqueId *id);
ncclResult_t weftUniqueIdFromString(const char *str, ncclUniqueId *id) {
  if (str == NULL) {
    WARN("weftUniqueIdFromString: str is NULL");
    return ncclInvalidArgument;
  }
  if (id == NULL) {
    WARN("weftUniqueIdFromString: id is NULL");
    return ncclInvalidArgument;
  }
  char why[96];
  if (decode_hex(str, id, why, sizeof(why)) != 0) {
    WARN("weftUniqueIdFromString: the text %s", why);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

// Strict decimal: optional surrounding blanks, digits only, fits in an int.
// Returns 0 and sets *value, or -1 for anything else.
static int parse_int(const char *text, long *value) {
  const char *p = text;
  while (*p == ' ' || *p == '\t') p++;
  if (*p < '0' || *p > '9') return -1;
  long v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (*p - '0');
    if (v > INT_MAX) return -1;
  }
  while (*p == ' ' || *p == '\t') p++;
  if (*p != '\0') return -1;
  *value = v;
  return 0;
}

// Reads a rank/size pair given by variable names and values; validates them.
static ncclResult_t parse_rank_size(const char *rank_var, const char *rank_text,
                                    const char *size_var, const char *size_text, int *rank,
                                    int *size) {
  long r, s;
  if (rank_text == NULL && size_text == NULL) {
    WARN("weftInitFromEnv: %s and %s are not set", rank_var, size_var);
    return ncclInvalidArgument;
  }
  if (rank_text == NULL) {
    WARN("weftInitFromEnv: %s is set but %s is not", size_var, rank_var);
    return ncclInvalidArgument;
  }
  if (size_text == NULL) {
    WARN("weftInitFromEnv: %s is set but %s is not", rank_var, size_var);
    return ncclInvalidArgument;
  }
  if (parse_int(rank_text, &r) != 0) {
    WARN("weftInitFromEnv: %s='%s' is not an integer from 0 to %d", rank_var, rank_text, INT_MAX);
    return ncclInvalidArgument;
  }
  if (parse_int(size_text, &s) != 0) {
    WARN("weftInitFromEnv: %s='%s' is not an integer from 1 to %d", size_var, size_text, INT_MAX);
    return ncclInvalidArgument;
  }
  if (s < 1) {
    WARN("weftInitFromEnv: %s=%ld must be at least 1", size_var, s);
    return ncclInvalidArgument;
  }
  if (r >= s) {
    WARN("weftInitFromEnv: rank %ld out of range for %s=%ld (%s='%s')", r, size_var, s,
         rank_var, rank_text);
    return ncclInvalidArgument;
  }
  *rank = (int)r;
  *size = (int)s;
  return ncclSuccess;
}

// "host:port" for the rendezvous: NCCL_COMM_ID, else MASTER_ADDR and
// MASTER_PORT + WEFT_MASTER_PORT_OFFSET. IPv6 literals get brackets.
static ncclResult_t rendezvous_address(char *buf, size_t len, const char **source) {
  const char *comm_id = weft_env_NCCL_COMM_ID();
  if (comm_id != NULL && comm_id[0] != '\0') {
    if (strlen(comm_id) >= len) {
      WARN("weftInitFromEnv: NCCL_COMM_ID='%.64s...' is too long", comm_id);
      return ncclInvalidArgument;
    }
    snprintf(buf, len, "%s", comm_id);
    *source = "NCCL_COMM_ID";
    return ncclSuccess;
  }
  const char *addr = getenv("MASTER_ADDR");
  const char *port_text = getenv("MASTER_PORT");
  if ((addr == NULL || addr[0] == '\0') && (port_text == NULL || port_text[0] == '\0')) {
    WARN("weftInitFromEnv: no rendezvous address: set NCCL_COMM_ID or MASTER_ADDR/MASTER_PORT");
    return ncclInvalidArgument;
  }
  if (addr == NULL || addr[0] == '\0') {
    WARN("weftInitFromEnv: MASTER_PORT='%s' is set but MASTER_ADDR is not", port_text);
    return ncclInvalidArgument;
  }
  if (port_text == NULL || port_text[0] == '\0') {
    WARN("weftInitFromEnv: MASTER_ADDR='%s' is set but MASTER_PORT is not", addr);
    return ncclInvalidArgument;
  }
  long port;
  if (parse_int(port_text, &port) != 0 || port < 1 || port > 65535) {
    WARN("weftInitFromEnv: MASTER_PORT='%s' is not a port number (1-65535)", port_text);
    return ncclInvalidArgument;
  }
  int64_t offset = weft_env_WEFT_MASTER_PORT_OFFSET();
  int64_t rdv_port = (int64_t)port + offset;
  if (rdv_port < 1 || rdv_port > 65535) {
    WARN("weftInitFromEnv: MASTER_PORT=%ld + WEFT_MASTER_PORT_OFFSET=%lld = %lld "
         "is not a port number",
         port, (long long)offset, (long long)rdv_port);
    return ncclInvalidArgument;
  }
  // A bare IPv6 literal has colons and no brackets.
  int bracket = strchr(addr, ':') != NULL && addr[0] != '[';
  int n = snprintf(buf, len, "%s%s%s:%lld", bracket ? "[" : "", addr, bracket ? "]" : "",
                   (long long)rdv_port);
  if (n < 0 || (size_t)n >= len) {
    WARN("weftInitFromEnv: MASTER_ADDR='%.64s...' is too long", addr);
    return ncclInvalidArgument;
  }
  *source = "MASTER_ADDR/MASTER_PORT";
  return ncclSuccess;
}

// weftrun's path: the id, rank and size are given outright.
static ncclResult_t init_from_weftrun(ncclComm_t *comm, const char *id_text) {
  int rank, size;
  ncclResult_t res = parse_rank_size("WEFT_RANK", weft_env_WEFT_RANK(), "WEFT_NRANKS",
                                     weft_env_WEFT_NRANKS(), &rank, &size);
  if (res != ncclSuccess) return res;
  ncclUniqueId id;
  char why[96];
  if (decode_hex(id_text, &id, why, sizeof(why)) != 0) {
    WARN("weftInitFromEnv: WEFT_UNIQUE_ID %s", why);
    return ncclInvalidArgument;
  }
  INFO(WEFT_LOG_INIT, "weftInitFromEnv: launcher weftrun, rank %d of %d", rank, size);
  return pncclCommInitRank(comm, size, id, rank);
}

WEFT_API(ncclResult_t, weftInitFromEnv, ncclComm_t *comm);
ncclResult_t weftInitFromEnv(ncclComm_t *comm) {
  if (comm == NULL) {
    WARN("weftInitFromEnv: comm is NULL");
    return ncclInvalidArgument;
  }
  *comm = NULL;

  const char *id_text = weft_env_WEFT_UNIQUE_ID();
  if (id_text != NULL) return init_from_weftrun(comm, id_text);

  const weft_launcher_t *found = NULL;
  for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
    if (getenv(launchers[i].rank_var) != NULL) {
      found = &launchers[i];
      break;
    }
  }
  if (found == NULL) {
    WARN("weftInitFromEnv: no launcher found: set WEFT_UNIQUE_ID/WEFT_RANK/WEFT_NRANKS "
         "(weftrun), RANK/WORLD_SIZE (torchrun), SLURM_PROCID/SLURM_NTASKS, "
         "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE or PMI_RANK/PMI_SIZE");
    return ncclInvalidArgument;
  }

  int rank, size;
  ncclResult_t res = parse_rank_size(found->rank_var, getenv(found->rank_var), found->size_var,
                                     getenv(found->size_var), &rank, &size);
  if (res != ncclSuccess) return res;

  char hostport[512];
  const char *source;
  res = rendezvous_address(hostport, sizeof(hostport), &source);
  if (res != ncclSuccess) return res;

  INFO(WEFT_LOG_INIT, "weftInitFromEnv: launcher %s (%s=%d, %s=%d), rendezvous at %s (from %s)",
       found->name, found->rank_var, rank, found->size_var, size, hostport, source);

  ncclUniqueId id;
  res = weft_rendezvous_id_from_addr(hostport, &id);
  if (res != ncclSuccess) {
    WARN("weftInitFromEnv: cannot use rendezvous address '%s' (from %s)", hostport, source);
    return res == ncclSystemError ? res : ncclInvalidArgument;
  }
  return pncclCommInitRank(comm, size, id, rank);
}
