/*
 * anysrc.h — receives from any peer (weftRecvAny): how such a receive takes
 * its place in every peer's order and then becomes an ordinary receive
 * from the peer whose message it matched (anysrc.c).
 */
#ifndef WEFT_ANYSRC_H
#define WEFT_ANYSRC_H

#include "engine.h"

// Launch: an any-source receive asks for a ticket on every peer's
// point-to-point receive connection (weft_op_launch then issues them).
void weft_anysrc_mark(weft_op_t *op);
// Still waiting to match a peer.
static inline int weft_anysrc_waiting(const weft_op_t *op) { return op->any.on && op->any.peer < 0; }
// Try to match: the first peer (round robin) whose connection has reached
// the operation's ticket and holds a message. Then the operation keeps
// that peer's ticket, gives up the others and receives from that peer.
// Returns 1 when it matched (or failed) now.
int weft_anysrc_match(weft_op_t *op);
// The operation ends (done or failed): an unmatched one gives up its
// tickets; the caller's source is written.
void weft_anysrc_finish(weft_op_t *op);
// The receive holding the current ticket on peer's point-to-point receive
// connection is done: serve the next ticket, skipping those given up.
void weft_anysrc_serve(struct ncclComm *comm, int peer);

#endif
