/*
 * net_notice.c — failure notices between hosts (net_notice.h).
 *
 * A communicator's first failure is recorded on each host (the abort
 * word); ranks of other hosts used to learn of it only from the reset of
 * their connections, and so blamed the rank that reset them, however far
 * the failure was. Before a rank resets its connections it now sends each
 * network peer a notice carrying the origin (its host's recorded failure);
 * a peer that reads one records that origin, noting who passed it on, and
 * passes it on in turn when it resets its own connections. A notice that
 * cannot be sent or read in time (the peer is gone, its slots are full)
 * changes nothing: the reset still fails the peer.
 */
#include "net_notice.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "transport.h"
#include "util.h"

#define NOTICE_WAIT_MS 50   // the most a failing rank waits for its notices to be taken
#define NOTICE_LINGER_MS 5  // then for their bytes to leave before the reset
#define RELAY_MARK " [passed on by rank "

static void nap_ms(int ms) {
  struct timespec t = {0, (long)ms * 1000000L};
  nanosleep(&t, NULL);
}

void weft_net_notice_send(const weft_net_t *net, void *const *comms, int n, const char *origin, char *buf) {
  snprintf(buf, WEFT_NET_NOTICE_BYTES, "%s", origin);
  size_t bytes = strlen(buf) + 1;
  void *reqs[n > 0 ? n : 1];
  int pending = 0;
  for (int i = 0; i < n; i++) {
    reqs[i] = NULL;
    if (comms[i] != NULL && net->isend(comms[i], buf, bytes, WEFT_TAG_FAILURE, &reqs[i]) == ncclSuccess &&
        reqs[i] != NULL)
      pending++;
  }
  int64_t until = weft_now_ns() + (int64_t)NOTICE_WAIT_MS * 1000000;
  while (pending > 0 && weft_now_ns() < until) {
    for (int i = 0; i < n; i++) {
      int done = 0;
      size_t size = 0;
      uint32_t tag = 0;
      if (reqs[i] == NULL) continue;
      if (net->test(reqs[i], &done, &size, &tag) != ncclSuccess || done) {
        reqs[i] = NULL;
        pending--;
      }
    }
    if (pending > 0) nap_ms(1);
  }
  nap_ms(NOTICE_LINGER_MS);
}

void weft_net_notice_read(const char *payload, size_t size, int from, int from_host, char *origin, char *reason,
                          size_t len) {
  size_t n = size < len ? size : len - 1;
  memcpy(origin, payload, n);
  origin[n] = '\0';
  char *relay = strstr(origin, RELAY_MARK);  // the origin, without the hops it took
  if (relay != NULL) *relay = '\0';
  snprintf(reason, len, "%s" RELAY_MARK "%d, host %d]", origin, from, from_host);
}
