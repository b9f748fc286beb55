/*
 * test_busid.c — PCI bus ids in any spelling come out in one, and what is
 * not a bus id is refused (src/base/busid.c).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "busid.h"

Test(busid, spellings_become_one, .timeout = 10) {
  const char *in[] = {"0000:3b:00.0", "0:3B:0.0", "0000:3B:00.0", "1:0a:1f.7"};
  const char *want[] = {"0000:3b:00.0", "0000:3b:00.0", "0000:3b:00.0", "0001:0a:1f.7"};
  for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
    char out[32] = "";
    cr_expect_eq(weft_busid_parse(in[i], out, sizeof(out)), 1, "%s", in[i]);
    cr_expect_str_eq(out, want[i], "%s", in[i]);
  }
}

Test(busid, other_names_are_refused_and_leave_out_alone, .timeout = 10) {
  const char *in[] = {"eth0", "mlx5_0", "0000:3b:00", "0000:3b:00.0x", "", "virtual"};
  for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
    char out[32] = "kept";
    cr_expect_eq(weft_busid_parse(in[i], out, sizeof(out)), 0, "%s", in[i]);
    cr_expect_str_eq(out, "kept", "%s", in[i]);
  }
  char out[32] = "kept";
  cr_expect_eq(weft_busid_parse(NULL, out, sizeof(out)), 0);
}

Test(busid, a_link_that_resolves_to_no_pci_function_gives_nothing, .timeout = 10) {
  char out[32] = "x";
  weft_busid_of_link("/nonexistent/device", out, sizeof(out));
  cr_expect_str_eq(out, "");
  weft_busid_of_link("/sys/class/net/lo/device", out, sizeof(out));  // loopback: virtual
  cr_expect_str_eq(out, "");
}
