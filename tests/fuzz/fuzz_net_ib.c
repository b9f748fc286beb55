/*
 * fuzz_net_ib.c — libFuzzer target: what the ibverbs backend takes from
 * outside. No RDMA device is needed: only the parsers run.
 *
 * Input: byte 0 picks the parser, the rest is its input.
 *   even  NCCL_IB_HCA text (weft_ib_hca_parse): a list it accepts has
 *         1..WEFT_IB_MAX_DEVS entries with non-empty names and ports -1 or
 *         1..255, and matching never crashes; a refusal leaves an empty list
 *         and says why.
 *   odd   the connection info a peer sends on the set-up channel
 *         (weft_ib_conn_unpack): what it accepts packs back to exactly the
 *         same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "net_ib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const uint8_t *in = data + 1;
  size_t len = size - 1;
  if ((data[0] & 1) == 0) {
    char *text = malloc(len + 1);
    if (text == NULL) return 0;
    memcpy(text, in, len);
    text[len] = '\0';
    weft_ib_hca_list_t l;
    char err[160] = "";
    if (weft_ib_hca_parse(text, &l, err, sizeof(err)) == 0) {
      if (text[0] != '\0' && (l.n < 1 || l.n > WEFT_IB_MAX_DEVS)) abort();
      for (int i = 0; i < l.n; i++) {
        if (l.specs[i].name[0] == '\0' || (l.specs[i].port != -1 && (l.specs[i].port < 1 || l.specs[i].port > 255)))
          abort();
        (void)weft_ib_hca_match(&l, l.specs[i].name, l.specs[i].port < 0 ? 1 : l.specs[i].port);
      }
      (void)weft_ib_hca_match(&l, "mlx5_0", 1);
    } else if (l.n != 0 || err[0] == '\0') {
      abort();
    }
    free(text);
  } else {
    weft_ib_conn_info_t info;
    char err[160];
    if (weft_ib_conn_unpack(in, len, &info, err, sizeof(err)) == 0) {
      uint8_t again[WEFT_IB_CONN_BYTES];
      if (weft_ib_conn_pack(&info, again) != len || memcmp(again, in, len) != 0) abort();
    }
  }
  return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup_process();
  return 0;
}
