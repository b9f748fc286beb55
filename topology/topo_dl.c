/*
 * topo_dl.c — opening an optional vendor library (NVML, libibverbs) and
 * filling a table of its functions, so a machine without it still runs.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "topo_probe.h"

int weft_topo_dlopen(const char *name, const weft_topo_sym_t *syms, size_t nsyms, void *ops, void **handle,
                     char *why, size_t len) {
  *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!*handle) {
    const char *e = dlerror();
    snprintf(why, len, "%s", e ? e : name);
    return -1;
  }
  for (size_t i = 0; i < nsyms; i++) {
    void *f = dlsym(*handle, syms[i].name);
    if (!f && !syms[i].optional) {
      snprintf(why, len, "%s lacks %s", name, syms[i].name);
      dlclose(*handle);
      *handle = NULL;
      return -1;
    }
    memcpy((char *)ops + syms[i].offset, &f, sizeof(f));  // object pointer to function pointer, as dlsym intends
  }
  return 0;
}
