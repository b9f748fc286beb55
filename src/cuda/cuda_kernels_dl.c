/*
 * cuda_kernels_dl.c — opening libweft-cuda.so (see cuda_kernels_dl.h).
 */
#include "cuda_kernels_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "debug.h"
#include "env.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static weft_cuda_kernels_t table;
static const weft_cuda_kernels_t *loaded;

// libweft-cuda.so in the folder libweft was loaded from.
static void beside_libweft(char *path, size_t len) {
  Dl_info info;
  path[0] = '\0';
  if (dladdr((void *)&weft_cuda_kernels, &info) == 0 || info.dli_fname == NULL) return;
  const char *slash = strrchr(info.dli_fname, '/');
  if (slash == NULL) return;
  snprintf(path, len, "%.*s/libweft-cuda.so", (int)(slash - info.dli_fname), info.dli_fname);
}

static void load(void) {
  char beside[1024];
  const char *named = weft_env_WEFT_CUDA_KERNELS_LIB();
  beside_libweft(beside, sizeof(beside));
  const char *tries[] = {named, named == NULL ? beside : NULL, named == NULL ? "libweft-cuda.so" : NULL};
  void *h = NULL;
  const char *used = NULL;
  for (size_t i = 0; i < 3 && h == NULL; i++)
    if (tries[i] != NULL && tries[i][0] != '\0' && (h = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL)) != NULL) used = tries[i];
  if (h == NULL) {
    INFO(WEFT_LOG_INIT, "CUDA: no device kernels (libweft-cuda.so not found: %s)", dlerror());
    return;
  }
  int (*abi)(void) = (int (*)(void))dlsym(h, "weft_cuda_kernels_abi");
  table.reduce = (weft_cuda_reduce_fn)dlsym(h, "weft_cuda_reduce");
  table.reduce_first = (weft_cuda_reduce_first_fn)dlsym(h, "weft_cuda_reduce_first");
  table.reduce_first_dscalar = (weft_cuda_reduce_first_dscalar_fn)dlsym(h, "weft_cuda_reduce_first_dscalar");
  table.error_string = (const char *(*)(int))dlsym(h, "weft_cuda_error_string");
  if (abi == NULL || abi() != WEFT_CUDA_KERNELS_ABI || table.reduce == NULL || table.reduce_first == NULL ||
      table.reduce_first_dscalar == NULL || table.error_string == NULL) {
    INFO(WEFT_LOG_INIT, "CUDA: %s is not a libweft-cuda.so of ABI %d; no device kernels", used,
         WEFT_CUDA_KERNELS_ABI);
    dlclose(h);
    return;
  }
  INFO(WEFT_LOG_INIT, "CUDA: device kernels from %s", used);
  loaded = &table;
}

const weft_cuda_kernels_t *weft_cuda_kernels(void) {
  pthread_once(&once, load);
  return loaded;
}
