/*
 * fake_driver.h — unit tests that point libweft at the stand-in CUDA driver
 * (tests/fakes/cuda, built as <build>/tests/lib/libweft-fake-cuda.so) and
 * call it themselves, through the same loaded library.
 */
#ifndef WEFT_TEST_FAKE_DRIVER_H
#define WEFT_TEST_FAKE_DRIVER_H

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_rt.h"

static char fake_path[512];

// libweft forgets its driver and loads the stand-in next time.
static inline void fake_driver_use(int singular_only) {
  const char *b = getenv("WEFT_BUILD_DIR");
  snprintf(fake_path, sizeof(fake_path), "%s/tests/lib/libweft-fake-cuda.so", b && b[0] ? b : "build");
  weft_cuda_test_reset(fake_path, singular_only);
}

// A function of the stand-in libweft has loaded (the test fails without it).
static inline void *fake_sym(const char *name) {
  void *h = dlopen(fake_path, RTLD_NOW | RTLD_NOLOAD);
  cr_assert_not_null(h, "the fake driver is not loaded");
  void *f = dlsym(h, name);
  dlclose(h);
  cr_assert_not_null(f, "fake driver lacks %s", name);
  return f;
}

#endif
