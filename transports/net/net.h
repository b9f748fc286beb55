/*
 * net.h — weft's network interface: what a network backend offers the
 * network transport (net_transport.c).
 *
 * It has the shape of NCCL's net plugin ABI (ncclNet_vN_t): a backend lists
 * devices, listens with an opaque handle that travels to the peer through
 * the bootstrap, connects and accepts one-directional communicators without
 * blocking, and moves messages with asynchronous isend/irecv requests that
 * test() completes. Messages on one communicator arrive in the order they
 * were sent; each carries a 32-bit tag that irecv reports (it does not
 * select). The built-in TCP backend is net_socket.c; NCCL net plugins are
 * adapted onto this interface (plugins/net/net_plugin_adapt.c).
 */
#ifndef WEFT_NET_H
#define WEFT_NET_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define WEFT_NET_HANDLE_BYTES 128

typedef struct {
  char name[64];         // the device as logs show it: "eth0", "mlx5_0:1"
  char addr[64];         // its address, for messages
  int speed_mbps;        // link speed, 0 if unknown
  // How a topology names it (net_device.c matches it to a NIC): the
  // interface or RDMA device ("mlx5_0", a topology's <net name=...>), its
  // RDMA port (0: none, or any), and its PCI bus id ("" unknown or virtual).
  char device[64];
  int port;
  char busid[32];
} weft_net_props_t;

typedef struct weft_net {
  const char *name;
  // Once per process; a failure makes the backend unavailable.
  ncclResult_t (*init)(void);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*get_properties)(int dev, weft_net_props_t *props);
  // Listen on device `dev`; `handle` (WEFT_NET_HANDLE_BYTES) is what a peer
  // passes to connect.
  ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
  // Non-blocking: *send_comm stays NULL until the backend can take messages
  // for the connection (it may queue them until the connection is up); call
  // again. `hello` (hello_len bytes) reaches the accepting side with the
  // connection.
  ncclResult_t (*connect)(int dev, const void *handle, const void *hello, size_t hello_len, void **send_comm);
  // Non-blocking: *recv_comm stays NULL until a connection came in; `hello`
  // receives what the connecting side sent (hello_len bytes exactly).
  ncclResult_t (*accept)(void *listen_comm, void *hello, size_t hello_len, void **recv_comm);
  // Post a send or a receive of at most `size` bytes; *request identifies it.
  ncclResult_t (*isend)(void *send_comm, const void *data, size_t size, uint32_t tag, void **request);
  ncclResult_t (*irecv)(void *recv_comm, void *data, size_t size, void **request);
  // Progress a request: *done becomes 1 when it completed (the request is
  // then freed); for receives *size and *tag tell what arrived. An error
  // (the peer went away, a message longer than the receive) fails the
  // request and the communicator.
  ncclResult_t (*test)(void *request, int *done, size_t *size, uint32_t *tag);
  // A descriptor that becomes readable or writable when test() may make
  // progress on this communicator (for epoll), or -1.
  int (*poll_fd)(void *comm);
  // Orderly close: pending sends are flushed first, so the peer sees every
  // message and then the end. A closed communicator's requests are gone.
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
  // Abortive close: the peer sees a failure, not an orderly end.
  void (*abort_comm)(void *comm);
  // Optional (NULL when the backend cannot): receiving straight into the
  // caller's buffers. After hold_large(recv_comm, min, until), receives
  // number < until (counted from 0 in the order posted) whose message is at
  // least `min` bytes stop after their header; held() then says so with its
  // size and tag, and release() lets the payload land in `data` (at least
  // the message's size; NULL: the buffer given to irecv).
  void (*hold_large)(void *recv_comm, size_t min, uint64_t until);
  int (*held)(void *request, size_t *size, uint32_t *tag);
  ncclResult_t (*release)(void *request, void *data);
  // Optional: the address a listen handle names (with its port), for
  // messages; without it they show the device's address.
  void (*handle_addr)(const void *handle, char *buf, size_t len);
} weft_net_t;

extern const weft_net_t weft_net_socket;

#endif
