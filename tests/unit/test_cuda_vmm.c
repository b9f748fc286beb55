/*
 * test_cuda_vmm.c — ncclMemAlloc/ncclMemFree on device memory through the
 * CUDA VMM calls (src/cuda/mem_cuda.c), against the stand-in driver
 * (tests/fakes/cuda/, build/tests/lib/libweft-fake-cuda.so): host memory
 * while the thread has no current context, with the driver switched off
 * (WEFT_CUDA_DRIVER_LIB=none) or absent; device memory on the current
 * context's device once there is one, rounded up to the 2 MiB granularity,
 * found by weft_mem_block_find and classified DEVICE, with bytes copied in
 * and out by cuMemcpyHtoD/DtoH; freeing it once and only once; a failing
 * cuMemMap or cuMemSetAccess (FAKE_CUDA_FAIL) unwinding with
 * ncclUnhandledCudaError and nothing left behind; and the registration log
 * line naming the kind of memory.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_rt.h"
#include "fake_driver.h"
#include "log_capture.h"
#include "debug.h"
#include "env.h"
#include "mem.h"
#include "nccl.h"

#define MIB ((size_t)1 << 20)
#define GRANULARITY (2 * MIB)  // the fake's cuMemGetAllocationGranularity

static void use_fake(void) {
  fake_driver_use(0);
  cr_assert_eq(weft_cuda_load(), WEFT_CUDA_PRESENT, "the fake driver %s did not load", fake_path);
  cr_assert(weft_cuda_has_vmm(weft_cuda_driver()), "the fake driver lacks the VMM calls");
}

// Makes device `ordinal`'s primary context current on this thread.
static void make_current(int ordinal) {
  typedef int (*get_fn)(weft_CUdevice *, int);
  typedef int (*retain_fn)(weft_CUcontext *, weft_CUdevice);
  typedef int (*set_fn)(weft_CUcontext);
  weft_CUdevice dev = -1;
  weft_CUcontext ctx = NULL;
  cr_assert_eq(((get_fn)fake_sym("cuDeviceGet"))(&dev, ordinal), 0);
  cr_assert_eq(((retain_fn)fake_sym("cuDevicePrimaryCtxRetain"))(&ctx, dev), 0);
  cr_assert_not_null(ctx);
  cr_assert_eq(((set_fn)fake_sym("cuCtxSetCurrent"))(ctx), 0);
}

// What ncclMemAlloc gives when it must give host memory: writable, HOST, a memfd block.
static void expect_host_block(void) {
  char *p = NULL;
  cr_assert_eq(ncclMemAlloc((void **)&p, 1000), ncclSuccess);
  cr_assert_not_null(p);
  weft_mem_info_t m;
  weft_mem_classify(p, 1000, &m);
  cr_expect_eq(m.kind, WEFT_MEM_HOST, "ncclMemAlloc gave %s memory", weft_mem_kind_name(m.kind));
  memset(p, 0xab, 1000);
  cr_expect_eq((unsigned char)p[999], 0xab);
  weft_mem_block_t b;
  cr_assert(weft_mem_block_find(p + 500, &b));
  cr_expect_eq(b.ptr, p);
  cr_expect_eq(b.size, 1000);
  cr_expect_eq(b.kind, WEFT_MEM_HOST);
  cr_expect_eq(b.device, -1);
  cr_expect_geq(b.fd, 0);
  cr_expect(!weft_mem_block_find(p + 1000, NULL), "one past the end is not in the block");
  cr_expect_eq(ncclMemFree(p), ncclSuccess);
  cr_expect(!weft_mem_block_find(p, NULL), "a freed block is still found");
}

Test(cuda_vmm, no_current_context_gives_host_memory, .timeout = 30) {
  use_fake();
  expect_host_block();
}

Test(cuda_vmm, driver_none_gives_host_memory, .timeout = 30) {
  weft_cuda_test_reset(NULL, 0);
  setenv("WEFT_CUDA_DRIVER_LIB", "none", 1);
  weft_env_reset();
  cr_assert_eq(weft_cuda_load(), WEFT_CUDA_ABSENT);
  expect_host_block();
}

Test(cuda_vmm, current_context_gives_device_memory, .timeout = 30) {
  use_fake();
  log_to_file("cuda-vmm", "ALLOC");
  make_current(1);
  void *p = NULL;
  cr_assert_eq(ncclMemAlloc(&p, 1000), ncclSuccess);
  cr_assert_not_null(p);
  cr_expect_eq((uintptr_t)p % GRANULARITY, 0, "%p is not aligned to the granularity", p);

  weft_mem_info_t m;
  weft_mem_classify(p, 1000, &m);
  cr_expect_eq(m.kind, WEFT_MEM_DEVICE, "ncclMemAlloc gave %s memory", weft_mem_kind_name(m.kind));
  cr_expect_eq(m.device, 1);

  weft_mem_block_t b;
  cr_assert(weft_mem_block_find((char *)p + GRANULARITY - 1, &b), "the last mapped byte is not in the block");
  cr_expect_eq(b.ptr, p);
  cr_expect_eq(b.size, GRANULARITY, "block of %zu bytes, expected the 1000 rounded up to 2 MiB", b.size);
  cr_expect_eq(b.requested, 1000);
  cr_expect_eq(b.kind, WEFT_MEM_DEVICE);
  cr_expect_eq(b.device, 1);
  cr_expect_neq(b.handle, 0);
  cr_expect_eq(b.exportable, 1);
  cr_expect(!weft_mem_block_find((char *)p + GRANULARITY, NULL));

  // Bytes in and out through the driver (a host memcpy would fault).
  typedef int (*htod_fn)(weft_CUdeviceptr, const void *, size_t);
  typedef int (*dtoh_fn)(void *, weft_CUdeviceptr, size_t);
  unsigned char in[1000], out[1000];
  for (int i = 0; i < 1000; i++) in[i] = (unsigned char)(i * 7 + 3);
  memset(out, 0, sizeof(out));
  weft_CUdeviceptr dp = (weft_CUdeviceptr)(uintptr_t)p;
  cr_expect_eq(((htod_fn)fake_sym("cuMemcpyHtoD_v2"))(dp, in, sizeof(in)), 0);
  cr_expect_eq(((dtoh_fn)fake_sym("cuMemcpyDtoH_v2"))(out, dp, sizeof(out)), 0);
  cr_expect_eq(memcmp(in, out, sizeof(in)), 0, "bytes did not round-trip through device memory");

  cr_expect_eq(log_count("device memory on device 1"), 1, "no INFO line names the device (see %s)", log_path);
  cr_expect_eq(ncclMemFree(p), ncclSuccess);
  cr_expect(!weft_mem_block_find(p, NULL), "a freed block is still found");
  cr_expect_eq(ncclMemFree(p), ncclInvalidArgument, "a second ncclMemFree of the same pointer succeeded");
  unlink(log_path);
}

Test(cuda_vmm, size_zero_and_null_stay_invalid, .timeout = 30) {
  use_fake();
  make_current(0);
  void *p = (void *)0x1;
  cr_expect_eq(ncclMemAlloc(&p, 0), ncclInvalidArgument);
  cr_expect_null(p);
  cr_expect_eq(ncclMemAlloc(NULL, 64), ncclInvalidArgument);
  cr_expect_eq(ncclMemFree(NULL), ncclSuccess);
}

// Open descriptors and mapped bytes of this process: what a leaked VMM
// handle (the fake backs it with a memfd) or reservation would add to.
static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  cr_assert_not_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

static size_t mapped_bytes(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  cr_assert_not_null(f);
  size_t total = 0;
  unsigned long lo, hi;
  char line[512];
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2) total += hi - lo;
  fclose(f);
  return total;
}

static void expect_clean_failure(const char *call) {
  log_to_file("cuda-vmm", "ALLOC");
  setenv("FAKE_CUDA_FAIL", call, 1);
  use_fake();
  make_current(1);
  void *warm = NULL;  // first-use costs (log file, driver state) before counting
  cr_assert_eq(ncclMemAlloc(&warm, 64), ncclUnhandledCudaError);
  int fds = open_fds();
  size_t bytes = mapped_bytes();
  void *p = (void *)0x1;
  cr_expect_eq(ncclMemAlloc(&p, 3 * MIB), ncclUnhandledCudaError, "with %s failing", call);
  cr_expect_null(p, "*ptr is not NULL after a failure");
  cr_expect_eq(open_fds(), fds, "%s failing leaked %d descriptors", call, open_fds() - fds);
  size_t now = mapped_bytes();
  cr_expect_lt(now, bytes + GRANULARITY, "%s failing left %zu more bytes mapped", call, now - bytes);
  FILE *f = fopen(log_path, "r");  // the WARN names the call and the driver's code
  cr_assert_not_null(f);
  char line[1024];
  int named = 0;
  while (fgets(line, sizeof(line), f) != NULL)
    named += strstr(line, "WARN") && strstr(line, call) && strstr(line, "CUDA error 2 (");
  fclose(f);
  cr_expect_geq(named, 1, "no WARN names %s and CUDA error 2 (see %s)", call, log_path);
  unsetenv("FAKE_CUDA_FAIL");
  // The driver still works afterwards.
  use_fake();
  make_current(1);
  cr_assert_eq(ncclMemAlloc(&p, 3 * MIB), ncclSuccess);
  weft_mem_block_t b;
  cr_assert(weft_mem_block_find(p, &b));
  cr_expect_eq(b.size, 2 * GRANULARITY);
  cr_expect_eq(ncclMemFree(p), ncclSuccess);
  unlink(log_path);
}

Test(cuda_vmm, failing_map_unwinds, .timeout = 30) { expect_clean_failure("cuMemMap"); }

Test(cuda_vmm, failing_set_access_unwinds, .timeout = 30) { expect_clean_failure("cuMemSetAccess"); }

Test(cuda_vmm, failing_create_unwinds, .timeout = 30) { expect_clean_failure("cuMemCreate"); }

Test(cuda_vmm, failing_reserve_unwinds, .timeout = 30) { expect_clean_failure("cuMemAddressReserve"); }

// ncclCommRegister's INFO line says what the buffer is.
Test(cuda_vmm, registration_names_the_memory, .timeout = 60) {
  use_fake();
  log_to_file("cuda-vmm", "REG");
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("WEFT_TIMEOUT", "20", 1);
  weft_env_reset();
  ncclComm_t comm = NULL;
  cr_assert_eq(ncclCommInitAll(&comm, 1, NULL), ncclSuccess);
  char host[256];
  void *h1 = NULL, *h2 = NULL, *dev = NULL;
  cr_expect_eq(ncclCommRegister(comm, host, sizeof(host), &h1), ncclSuccess);
  make_current(1);
  cr_assert_eq(ncclMemAlloc(&dev, 4096), ncclSuccess);
  cr_expect_eq(ncclCommRegister(comm, dev, 4096, &h2), ncclSuccess);
  cr_expect_eq(ncclCommDeregister(comm, h2), ncclSuccess);
  cr_expect_eq(ncclCommDeregister(comm, h1), ncclSuccess);
  cr_expect_eq(ncclMemFree(dev), ncclSuccess);
  cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
  cr_expect_eq(log_count("registered 256 bytes at"), 2, "see %s", log_path);  // registered + deregistered
  cr_expect_geq(log_count(": host memory"), 2, "no line says host memory (see %s)", log_path);
  cr_expect_eq(log_count(": device memory (device 1)"), 2, "no line says device memory (see %s)", log_path);
  unlink(log_path);
}
