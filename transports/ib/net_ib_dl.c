/*
 * net_ib_dl.c — libibverbs for the verbs backend, opened with dlopen so
 * that weft neither links against it nor needs it at run time: every
 * exported function the backend calls comes through weft_ibv_ops_t.
 * (verbs.h's inline helpers — post_send, post_recv, poll_cq,
 * req_notify_cq — call through the device context and need no symbol.)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "net_ib.h"

typedef struct {
  const char *name;
  size_t offset;
  int optional;
} sym_t;

#define SYM(n, f) {n, offsetof(weft_ibv_ops_t, f), 0}
static const sym_t syms[] = {
    SYM("ibv_get_device_list", get_device_list),
    SYM("ibv_free_device_list", free_device_list),
    SYM("ibv_get_device_name", get_device_name),
    SYM("ibv_open_device", open_device),
    SYM("ibv_close_device", close_device),
    SYM("ibv_query_device", query_device),
    SYM("ibv_query_port", query_port),  // the exported one fills the long-standing leading fields
    SYM("ibv_query_gid", query_gid),
    SYM("ibv_alloc_pd", alloc_pd),
    SYM("ibv_dealloc_pd", dealloc_pd),
    SYM("ibv_reg_mr", reg_mr),
    SYM("ibv_dereg_mr", dereg_mr),
    SYM("ibv_create_comp_channel", create_comp_channel),
    SYM("ibv_destroy_comp_channel", destroy_comp_channel),
    SYM("ibv_create_cq", create_cq),
    SYM("ibv_destroy_cq", destroy_cq),
    SYM("ibv_get_cq_event", get_cq_event),
    SYM("ibv_ack_cq_events", ack_cq_events),
    SYM("ibv_create_qp", create_qp),
    SYM("ibv_modify_qp", modify_qp),
    SYM("ibv_destroy_qp", destroy_qp),
    {"ibv_wc_status_str", offsetof(weft_ibv_ops_t, wc_status_str), 1},
};
#undef SYM

int weft_ibv_load(const char *libname, weft_ibv_ops_t *ops, void **handle, char *why, size_t len) {
  const char *name = libname ? libname : "libibverbs.so.1";
  memset(ops, 0, sizeof(*ops));
  *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (*handle == NULL) {
    const char *e = dlerror();
    snprintf(why, len, "%s", e ? e : name);
    return -1;
  }
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    void *f = dlsym(*handle, syms[i].name);
    if (f == NULL && !syms[i].optional) {
      snprintf(why, len, "%s lacks %s", name, syms[i].name);
      dlclose(*handle);
      *handle = NULL;
      memset(ops, 0, sizeof(*ops));
      return -1;
    }
    memcpy((char *)ops + syms[i].offset, &f, sizeof(f));  // object pointer to function pointer, as dlsym intends
  }
  return 0;
}
