/*
 * test_cuda_rt.c — the CUDA driver loader and pointer classification
 * (src/cuda/cuda_rt.c) against tests/fakes/cuda/, a stand-in driver whose
 * cuPointerGetAttribute(s) report its own ranges as device, managed or
 * registered host memory: host, device (two ordinals), managed, NULL, zero
 * bytes and buffers that run out of an allocation; the fallback to the
 * singular attribute call; "no CUDA" (no library, no device, NVIDIA's stub
 * library where installed) with its one INFO line and no further driver
 * calls; and a concurrent first load that initialises the driver once.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_rt.h"
#include "fake_driver.h"
#include "log_capture.h"
#include "debug.h"
#include "env.h"

static void use_fake(int singular_only) { fake_driver_use(singular_only); }

static weft_mem_info_t classify(const void *p, size_t bytes) {
  weft_mem_info_t m;
  memset(&m, 0x5a, sizeof(m));
  weft_mem_classify(p, bytes, &m);
  return m;
}

#define EXPECT_KIND(p, bytes, want_kind, want_dev)                                                             \
  do {                                                                                                         \
    weft_mem_info_t m_ = classify((p), (bytes));                                                               \
    cr_expect_eq(m_.kind, (want_kind), "%s (%zu bytes): %s, expected %s", #p, (size_t)(bytes),                 \
                 weft_mem_kind_name(m_.kind), weft_mem_kind_name(want_kind));                                  \
    cr_expect_eq(m_.device, (want_dev), "%s: device %d, expected %d", #p, m_.device, (int)(want_dev));         \
  } while (0)

static void check_kinds(void) {
  cr_assert_eq(weft_cuda_load(), WEFT_CUDA_PRESENT, "the fake driver %s did not load", fake_path);
  cr_expect_eq(weft_cuda_device_count(), 2);
  cr_expect_not_null(weft_cuda_driver());
  typedef int (*alloc_fn)(unsigned long long *, size_t);
  typedef int (*managed_fn)(unsigned long long *, size_t, unsigned int);
  typedef int (*reg_fn)(void *, size_t, unsigned int);
  void *(*alloc_on)(int, size_t) = (void *(*)(int, size_t))fake_sym("fake_cuda_alloc_on");
  void *(*device_end)(int) = (void *(*)(int))fake_sym("fake_cuda_device_end");
  unsigned long long d0 = 0, mg = 0;
  cr_assert_eq(((alloc_fn)fake_sym("cuMemAlloc_v2"))(&d0, 4096), 0);
  cr_assert_eq(((managed_fn)fake_sym("cuMemAllocManaged"))(&mg, 4096, 1), 0);
  void *dev0 = (void *)(uintptr_t)d0, *man = (void *)(uintptr_t)mg, *dev1 = alloc_on(1, 4096);
  cr_assert_not_null(dev1);

  char stack[256] = {0};
  char *heap = malloc(8192), *pinned = malloc(8192);
  cr_assert_eq(((reg_fn)fake_sym("cuMemHostRegister_v2"))(pinned, 8192, 0), 0);

  EXPECT_KIND(heap, 8192, WEFT_MEM_HOST, -1);
  EXPECT_KIND(stack, sizeof(stack), WEFT_MEM_HOST, -1);
  EXPECT_KIND(NULL, 0, WEFT_MEM_HOST, -1);
  EXPECT_KIND(NULL, 64, WEFT_MEM_HOST, -1);
  EXPECT_KIND(dev0, 4096, WEFT_MEM_DEVICE, 0);
  EXPECT_KIND((char *)dev0 + 100, 1, WEFT_MEM_DEVICE, 0);
  EXPECT_KIND(dev1, 4096, WEFT_MEM_DEVICE, 1);
  EXPECT_KIND(man, 4096, WEFT_MEM_MANAGED, 0);
  EXPECT_KIND(dev0, 0, WEFT_MEM_HOST, -1);  // nothing to move: no kind
  cr_expect_eq(classify(heap, 8192).registered, 0);
  EXPECT_KIND(pinned, 8192, WEFT_MEM_HOST, -1);
  cr_expect_eq(classify(pinned, 8192).registered, 1, "registered host memory is not reported as such");
  cr_expect_eq(classify(pinned + 4096, 8192).registered, 0, "half registered counts as registered");
  // A buffer that runs past the end of what the driver handed out.
  char *end0 = device_end(0);
  EXPECT_KIND(end0 - 16, 16, WEFT_MEM_DEVICE, 0);
  EXPECT_KIND(end0 - 16, 32, WEFT_MEM_MIXED, -1);
  char *end1 = device_end(1);
  EXPECT_KIND(end1 - 8, 64, WEFT_MEM_MIXED, -1);
  free(heap);
  free(pinned);
}

Test(cuda_rt, classifies_with_the_fake_driver, .timeout = 30) {
  use_fake(0);
  check_kinds();
}

Test(cuda_rt, classifies_with_the_singular_attribute_call, .timeout = 30) {
  use_fake(1);
  check_kinds();
  cr_expect_null(weft_cuda_driver()->cuPointerGetAttributes);
}

Test(cuda_rt, driver_table_has_the_engine_and_vmm_calls, .timeout = 30) {
  use_fake(0);
  const weft_cuda_driver_t *d = weft_cuda_driver();
  cr_assert_not_null(d);
  cr_expect_not_null(d->cuInit);
  cr_expect_not_null(d->cuPointerGetAttribute);
  cr_expect_not_null(d->cuMemHostRegister);
  cr_expect_not_null(d->cuStreamWaitValue32);
  cr_expect(weft_cuda_has_engine(d), "the fake driver lacks a call of the device engine's group");
  cr_expect(weft_cuda_has_vmm(d), "the fake driver lacks a call of the VMM group");
}

static void expect_no_cuda(const char *lib, const char *why) {
  log_to_file("cuda-rt", "INIT");
  weft_cuda_test_reset(lib, 0);
  char buf[64] = {0};
  for (int i = 0; i < 1000; i++) {
    weft_mem_info_t m = classify(i % 2 ? buf : NULL, sizeof(buf));
    cr_assert_eq(m.kind, WEFT_MEM_HOST);
    cr_assert_eq(m.device, -1);
  }
  cr_expect_eq(weft_cuda_load(), WEFT_CUDA_ABSENT);
  cr_expect_eq(weft_cuda_device_count(), 0);
  cr_expect_null(weft_cuda_driver());
  cr_expect_eq(log_count("CUDA: no driver in use"), 1, "expected one INFO line (see %s)", log_path);
  cr_expect_eq(log_count(why), 1, "the INFO line does not say '%s' (see %s)", why, log_path);
  cr_expect_eq(log_count("WARN"), 0, "no CUDA is not a warning");
  unlink(log_path);
}

Test(cuda_rt, no_library_means_no_cuda, .timeout = 30) {
  expect_no_cuda("/nonexistent/libcuda-weft-test.so.1", "libcuda-weft-test.so.1");
}

Test(cuda_rt, none_disables_the_driver, .timeout = 30) { expect_no_cuda("none", "WEFT_CUDA_DRIVER_LIB=none"); }

Test(cuda_rt, no_device_means_no_cuda_and_no_more_driver_calls, .timeout = 30) {
  setenv("FAKE_CUDA_DEVICES", "0", 1);
  use_fake(0);
  expect_no_cuda(fake_path, "cuInit: 100");
  // The library stays loaded (cuInit ran); classification never asked it again.
  int (*queries)(void) = (int (*)(void))fake_sym("fake_cuda_query_calls");
  cr_expect_eq(queries(), 0, "the fast path queried the driver %d times", queries());
}

Test(cuda_rt, nvidia_stub_library_means_no_cuda, .timeout = 30) {
  const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (access(stub, R_OK) != 0) cr_skip_test("%s is not installed", stub);
  expect_no_cuda(stub, "cuInit: 34");  // CUDA_ERROR_STUB_LIBRARY
}

Test(cuda_rt, the_env_knob_names_the_library, .timeout = 30) {
  use_fake(0);  // resolves fake_path
  weft_cuda_test_reset(NULL, 0);
  setenv("WEFT_CUDA_DRIVER_LIB", fake_path, 1);
  weft_env_reset();
  cr_expect_eq(weft_cuda_load(), WEFT_CUDA_PRESENT);
  setenv("WEFT_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1", 1);
  weft_env_reset();
  weft_cuda_test_reset(NULL, 0);
  cr_expect_eq(weft_cuda_load(), WEFT_CUDA_ABSENT);
}

static void *load_thread(void *arg) {
  (void)arg;
  weft_mem_info_t m;
  char b[8] = {0};
  weft_mem_classify(b, sizeof(b), &m);
  return (void *)(intptr_t)weft_cuda_load();
}

Test(cuda_rt, concurrent_first_use_loads_once, .timeout = 30) {
  use_fake(0);
  enum { N = 8 };
  pthread_t th[N];
  for (int i = 0; i < N; i++) cr_assert_eq(pthread_create(&th[i], NULL, load_thread, NULL), 0);
  for (int i = 0; i < N; i++) {
    void *r;
    pthread_join(th[i], &r);
    cr_expect_eq((int)(intptr_t)r, WEFT_CUDA_PRESENT);
  }
  int (*inits)(void) = (int (*)(void))fake_sym("fake_cuda_init_calls");
  cr_expect_eq(inits(), 1, "cuInit ran %d times", inits());
}
