/*
 * example_net.h — the example net plugin's calls, independent of the ABI
 * version (example_net.c implements them over TCP; example_abi.c exports
 * them as ncclNetPlugin_v6 ... _v12).
 */
#ifndef EXAMPLE_NET_H
#define EXAMPLE_NET_H

#include "net_abi.h"

#define EX_NAME "example"

extern weft_abi_logger_t ex_log;

ncclResult_t ex_init(weft_abi_logger_t log);
ncclResult_t ex_devices(int *ndev);
// The properties every version shares; the caller copies them into its struct.
ncclResult_t ex_props(int dev, char **name, int *speed);
ncclResult_t ex_listen(int dev, void *handle, void **listen_comm);
ncclResult_t ex_connect(int dev, void *handle, void **send_comm);
ncclResult_t ex_accept(void *listen_comm, void **recv_comm);
ncclResult_t ex_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t ex_dereg_mr(void *comm, void *mhandle);
ncclResult_t ex_isend(void *send_comm, void *data, size_t size, void *mhandle, void **request);
ncclResult_t ex_irecv(void *recv_comm, int n, void **data, const size_t *sizes, void **mhandles, void **request);
ncclResult_t ex_test(void *request, int *done, size_t *size);
ncclResult_t ex_close(void *comm);
ncclResult_t ex_close_listen(void *listen_comm);

#define EX_LOG(level, ...) \
  do {                     \
    if (ex_log != NULL) ex_log((level), 0x10 /* NET */, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif
