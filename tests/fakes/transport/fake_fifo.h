/*
 * fake_fifo.h — a stand-in transport for tests (fake_fifo.c): the slot
 * FIFOs of transports/transport.h in the heap of one process, for ranks
 * that are threads. No peer-memory reads, no receiving into the engine's
 * buffers: the smallest transport the contract allows.
 */
#ifndef WEFT_FAKE_FIFO_H
#define WEFT_FAKE_FIFO_H

#include <stdint.h>

#include "transport.h"

extern const weft_transport_t weft_fake_fifo_transport;

// Messages posted through it in this process so far (every connection).
uint64_t weft_fake_fifo_posted(void);

#endif
