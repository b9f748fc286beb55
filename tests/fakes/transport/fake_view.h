/*
 * fake_view.h — a transport view (transports/transport.h) without a
 * communicator, for tests that set transports up by hand
 * (tests/unit/test_transport_contract.c).
 *
 * The ranks meet on a board: memory shared by threads, or by processes
 * forked after it was made, holding a process-shared barrier (the
 * allgather), every rank's doorbell, the failure word and the secret.
 * The network backend is the built-in socket one; every rank uses its
 * device 0. A test can make the k-th allgather fail, on every rank alike,
 * to break a set-up part way.
 */
#ifndef WEFT_FAKE_VIEW_H
#define WEFT_FAKE_VIEW_H

#include "transport.h"

#define WEFT_FAKE_VIEW_MAX_RANKS 8

typedef struct weft_fake_board weft_fake_board_t;

// A board for nranks ranks (shared memory; make it before forking), or NULL.
weft_fake_board_t *weft_fake_board_new(int nranks);
void weft_fake_board_free(weft_fake_board_t *b);

// Fills v for `rank` on board b: host_of[nranks] (copied), the FIFO
// geometry, a zeroed connection table, every callback. v->core is the
// harness's; weft_fake_view_fini frees what this made.
ncclResult_t weft_fake_view_init(weft_transport_view_t *v, weft_fake_board_t *b, int rank, const int *host_of,
                                 size_t slot_bytes, size_t nslots);
void weft_fake_view_fini(weft_transport_view_t *v);

// Every rank waits here until all have come (not counted as an allgather).
void weft_fake_view_barrier(const weft_transport_view_t *v);

// The k-th allgather from now (1 first) and every later one return
// ncclSystemError without meeting the others; 0: none fail. Set the same
// k on every rank, or the ranks that do meet wait for ever.
void weft_fake_view_fail_allgather_at(weft_transport_view_t *v, int k);

#endif
