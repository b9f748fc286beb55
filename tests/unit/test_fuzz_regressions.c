/*
 * test_fuzz_regressions.c — inputs the fuzz targets (tests/fuzz/) found
 * crashing, kept as ordinary tests so the plain build guards them too.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "socket.h"
#include "topo_hwloc_compat.h"

static char *translate(const char *text, size_t *len) {
  char path[] = "/tmp/weft-test-fuzz-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  char *out = weft_hwloc_xml_v2(path, len);
  unlink(path);
  return out;
}

// fuzz_topo: an hwloc 3 file whose osdev_type values are not numbers made
// the translation write one byte per such attribute past its buffer.
Test(fuzz_regressions, hwloc3_osdev_type_without_number) {
  char in[4096] = "<topology version=\"3.0\">";
  for (int i = 0; i < 100; i++) strcat(in, "<object type=\"OSDev\" osdev_type=\"\"/>");
  strcat(in, "</topology>");
  size_t len = 0;
  char *out = translate(in, &len);
  cr_assert_not_null(out);
  in[strlen("<topology version=\"")] = '2';  // the only change expected
  cr_assert_eq(len, strlen(in));
  cr_assert_str_eq(out, in);
  free(out);
}

// Numbers are still translated (network 16 -> 2, OpenFabrics 32 -> 3).
Test(fuzz_regressions, hwloc3_osdev_type_numbers) {
  size_t len = 0;
  char *out = translate("<topology version=\"3.0\"><o osdev_type=\"16\"/><o osdev_type=\"48\"/></topology>", &len);
  cr_assert_not_null(out);
  cr_assert_str_eq(out, "<topology version=\"2.0\"><o osdev_type=\"2\"/><o osdev_type=\"3\"/></topology>");
  cr_assert_eq(len, strlen(out));
  free(out);
}

// fuzz_env: "[::%1]:290" parsed (scope by index) but printed its scope by
// name, "[::%lo]:290", which the numeric-only lookup refused. Names are
// now turned into their index when parsing; an unknown name is refused.
Test(fuzz_regressions, ipv6_scope_prints_and_parses_back) {
  weft_sockaddr_t a, b;
  char printed[WEFT_ADDR_STRLEN];
  cr_assert_eq(weft_socket_parse_addr("[::%1]:290", &a), ncclSuccess);
  weft_socket_addr_str(&a, printed, sizeof(printed));
  cr_expect_eq(weft_socket_parse_addr(printed, &b), ncclSuccess, "'%s' does not parse back", printed);
  cr_expect_eq(b.sin6.sin6_scope_id, a.sin6.sin6_scope_id);
  cr_expect_eq(b.sin6.sin6_port, a.sin6.sin6_port);
  cr_expect_eq(weft_socket_parse_addr("[fe80::1%no-such-interface]:1", &b), ncclInvalidArgument);
}
