/*
 * net_notice.h — the failure notice: what a rank whose communicator failed
 * tells its network peers before it resets its connections, so that they
 * learn where the failure began instead of blaming the rank that reset.
 */
#ifndef WEFT_NET_NOTICE_H
#define WEFT_NET_NOTICE_H

#include <stddef.h>

#include "net.h"

// The longest notice (the origin's text, NUL included).
#define WEFT_NET_NOTICE_BYTES 320

// Sends `origin` as a failure notice (tag WEFT_TAG_FAILURE) on each of the n
// backend send communicators (NULL entries are skipped), then waits,
// bounded, until the backend took every notice and the bytes had time to
// leave, so the reset that follows does not overtake them. `buf` holds the
// bytes while they are sent (WEFT_NET_NOTICE_BYTES).
void weft_net_notice_send(const weft_net_t *net, void *const *comms, int n, const char *origin, char *buf);

// The origin a received notice carries (payload: `size` bytes of a slot),
// without the hops it travelled, into origin[len]; how this rank records
// it, naming the rank that passed it on, into reason[len].
void weft_net_notice_read(const char *payload, size_t size, int from, int from_host, char *origin, char *reason,
                          size_t len);

#endif
