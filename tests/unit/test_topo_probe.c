/*
 * test_topo_probe.c — NVML and libibverbs as detection uses them: absent
 * libraries (a library name that does not exist) leave the graph exactly as
 * it was; the machine's own libibverbs, with no RDMA device, too; a stand-in
 * NVML table drives the NVLink path (GPUs to an NVSwitch, GPU to GPU); the
 * ibverbs speed codes.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "topo_probe.h"

// One socket, two H100s (PCI only: finalize is still to come).
static weft_topo_t *two_gpus(void) {
  weft_topo_t *t = weft_topo_new("test");
  cr_assert_not_null(t);
  int cpu = weft_topo_add_node(t, WEFT_TOPO_CPU, -1);
  weft_topo_attr_set(&t->nodes[cpu].attrs, "numaid", "0");
  weft_topo_attr_set(&t->nodes[cpu].attrs, "affinity", "0000000f");
  const char *busids[] = {"0000:07:00.0", "0000:0a:00.0"};
  for (int i = 0; i < 2; i++) {
    int g = weft_topo_add_node(t, WEFT_TOPO_PCI, cpu);
    weft_topo_attrs_t *a = &t->nodes[g].attrs;
    weft_topo_attr_set(a, "busid", busids[i]);
    weft_topo_attr_set(a, "class", "0x030200");
    weft_topo_attr_set(a, "vendor", "0x10de");
    weft_topo_attr_set(a, "device", "0x2330");
    weft_topo_attr_set(a, "link_speed", "32.0 GT/s PCIe");
    weft_topo_attr_set(a, "link_width", "16");
  }
  return t;
}

static char *finalized_signature(weft_topo_t *t) {
  char err[256] = "";
  cr_assert_eq(weft_topo_finalize(t, err, sizeof(err)), 0, "%s", err);
  char *sig = weft_topo_signature(t);
  cr_assert_not_null(sig);
  return sig;
}

Test(topo_probe, nvml_absent_changes_nothing, .timeout = 30) {
  weft_topo_t *a = two_gpus(), *b = two_gpus();
  char status[160] = "";
  weft_topo_nvml_override("libweft-no-such-nvml.so.1", NULL);
  cr_assert_eq(weft_topo_nvml_probe(b, status, sizeof(status)), 0);
  weft_topo_nvml_override(NULL, NULL);
  cr_expect(strstr(status, "not available") != NULL, "%s", status);
  cr_expect(strstr(status, "libweft-no-such-nvml.so.1") != NULL, "%s", status);
  cr_expect_eq(b->nnvlinks, 0);
  char *sa = finalized_signature(a), *sb = finalized_signature(b);
  cr_expect_str_eq(sa, sb);
  free(sa), free(sb);
  weft_topo_free(a), weft_topo_free(b);
}

Test(topo_probe, ibverbs_absent_or_no_device_changes_nothing, .timeout = 30) {
  const char *libs[] = {"libweft-no-such-ibverbs.so.1", NULL}; // NULL: this machine's libibverbs
  for (int i = 0; i < 2; i++) {
    weft_topo_t *a = two_gpus(), *b = two_gpus();
    char status[160] = "";
    weft_topo_ibv_override(libs[i]);
    cr_assert_eq(weft_topo_ibv_probe(b, status, sizeof(status)), 0);
    weft_topo_ibv_override(NULL);
    cr_expect(strncmp(status, "ibverbs: ", 9) == 0, "%s", status);
    if (i == 0) cr_expect(strstr(status, "not available") != NULL, "%s", status);
    int devices = i == 1 ? atoi(status + 9) : 0;
    if (devices == 0) { // where RDMA devices exist the graph rightly grows
      char *sa = finalized_signature(a), *sb = finalized_signature(b);
      cr_expect_str_eq(sa, sb, "%s", status);
      free(sa), free(sb);
    }
    weft_topo_free(a), weft_topo_free(b);
  }
}

// --- a stand-in NVML: GPU 07 has 6 links to NVSwitch 0000:c0:00.0, 6 to
// NVSwitch 0000:c1:00.0 and 2 to GPU 0a; GPU 0a has the 2 back; the rest down.
static int fake_init(void) { return 0; }
static int fake_shutdown(void) { return 0; }
static const char *fake_error(int r) { return r ? "fake error" : "success"; }
static int fake_by_busid(const char *busid, weft_nvml_device_t *dev) {
  *dev = (weft_nvml_device_t)(intptr_t)(strstr(busid, "07:00") ? 1 : strstr(busid, "0a:00") ? 2 : 0);
  return *dev ? 0 : 6; // NVML_ERROR_NOT_FOUND
}
static int fake_state(weft_nvml_device_t dev, unsigned link, int *on) {
  *on = (intptr_t)dev == 1 ? link < 14 : link < 2;
  return 0;
}
static const char *remote_of(weft_nvml_device_t dev, unsigned link) {
  if ((intptr_t)dev == 2) return "00000000:07:00.0";
  return link < 6 ? "00000000:C0:00.0" : link < 12 ? "00000000:C1:00.0" : "00000000:0A:00.0";
}
static int fake_remote(weft_nvml_device_t dev, unsigned link, weft_nvml_pci_t *pci) {
  snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", remote_of(dev, link));
  return 0;
}
static int fake_version(weft_nvml_device_t dev, unsigned link, unsigned *v) {
  (void)dev, (void)link;
  *v = 4;
  return 0;
}
static int fake_cc(weft_nvml_device_t dev, int *major, int *minor) {
  (void)dev;
  *major = 9, *minor = 0;
  return 0;
}
static const weft_nvml_ops_t fake_ops = {
    .init = fake_init, .shutdown = fake_shutdown, .error_string = fake_error, .by_busid = fake_by_busid,
    .link_state = fake_state, .link_remote = fake_remote, .link_version = fake_version, .remote_type = NULL,
    .cuda_cc = fake_cc};

Test(topo_probe, nvml_links_become_nvlinks, .timeout = 30) {
  weft_topo_t *t = two_gpus();
  weft_topo_add_nvlink(t, 1, "0000:0a:00.0", 9, 0x030200, 0); // from hwloc: replaced by NVML's
  char status[160] = "", err[256] = "";
  weft_topo_nvml_override(NULL, &fake_ops);
  cr_assert_eq(weft_topo_nvml_probe(t, status, sizeof(status)), 0);
  weft_topo_nvml_override(NULL, NULL);
  cr_expect(strstr(status, "2 of 2 GPUs") != NULL, "%s", status);
  cr_expect(strstr(status, "16 links") != NULL, "%s", status);
  cr_assert_eq(weft_topo_finalize(t, err, sizeof(err)), 0, "%s", err);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_GPU), 2);
  cr_expect_eq(weft_topo_count(t, WEFT_TOPO_NVS), 2);
  int g0 = weft_topo_find_busid(t, "0000:07:00.0"), g1 = weft_topo_find_busid(t, "0000:0a:00.0");
  int s0 = weft_topo_find_busid(t, "0000:c0:00.0");
  cr_assert(g0 >= 0 && g1 >= 0 && s0 >= 0);
  cr_expect_eq(t->nodes[g0].sm, 90);
  int direct = 0, to_switch = 0;
  for (int l = 0; l < t->nlinks; l++) {
    const weft_topo_link_t *k = &t->links[l];
    if (k->kind != WEFT_LINK_NVL) continue;
    if ((k->a == g0 && k->b == g1) || (k->a == g1 && k->b == g0)) direct = k->count;
    if ((k->a == g0 && k->b == s0) || (k->a == s0 && k->b == g0)) to_switch = k->count;
  }
  cr_expect_eq(direct, 2);
  cr_expect_eq(to_switch, 6);
  weft_topo_path_t p;
  cr_assert_eq(weft_topo_path(t, g0, g1, &p), 0);
  cr_expect_eq(p.cls, WEFT_PATH_NVL);
  weft_topo_free(t);
}

Test(topo_probe, nvml_without_gpus_is_not_asked, .timeout = 30) {
  weft_topo_t *t = weft_topo_new("cpu only");
  int cpu = weft_topo_add_node(t, WEFT_TOPO_CPU, -1);
  weft_topo_attr_set(&t->nodes[cpu].attrs, "numaid", "0");
  char status[160] = "";
  weft_topo_nvml_override(NULL, &fake_ops);
  cr_assert_eq(weft_topo_nvml_probe(t, status, sizeof(status)), 0);
  weft_topo_nvml_override(NULL, NULL);
  cr_expect(strstr(status, "no NVIDIA GPU") != NULL, "%s", status);
  cr_expect_eq(t->nnvlinks, 0);
  weft_topo_free(t);
}

Test(topo_probe, ibverbs_speed_codes, .timeout = 10) {
  cr_expect_float_eq(weft_topo_ibv_gbps(64, 2), 200.0, 1e-9);  // HDR 4x
  cr_expect_float_eq(weft_topo_ibv_gbps(128, 2), 400.0, 1e-9); // NDR 4x
  cr_expect_float_eq(weft_topo_ibv_gbps(32, 2), 100.0, 1e-9);  // EDR 4x
  cr_expect_float_eq(weft_topo_ibv_gbps(128, 16), 200.0, 1e-9); // NDR 2x
  cr_expect_float_eq(weft_topo_ibv_gbps(1, 1), 2.5, 1e-9);     // SDR 1x
  cr_expect_float_eq(weft_topo_ibv_gbps(3, 2), 0.0, 1e-9);     // unknown speed code
  cr_expect_float_eq(weft_topo_ibv_gbps(64, 3), 0.0, 1e-9);    // unknown width code
}
