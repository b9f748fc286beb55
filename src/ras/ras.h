/*
 * ras.h — RAS (reliability, availability, serviceability): the job-wide
 * view NVIDIA's ncclras client asks for, as the communicators see it.
 *
 * Every process with a communicator runs one RAS thread (NCCL_RAS_ENABLE,
 * on by default). It answers NCCL's text protocol on NCCL_RAS_ADDR
 * (localhost:28028, shared by the job's processes of a host through
 * SO_REUSEPORT, as NCCL shares it) and, on an ephemeral port of the
 * bootstrap interface, the other processes' RAS threads. The thread sleeps
 * in poll(); the data path never calls into it (docs/reliability.md).
 */
#ifndef WEFT_RAS_H
#define WEFT_RAS_H

#include "nccl.h"

struct ncclComm;

// Collective over the communicator at the end of its initialisation: every
// rank tells the others where its process's RAS thread listens (one
// bootstrap allgather, also when RAS is off, so ranks never disagree), and
// the communicator joins this process's report. Starts the thread with the
// first communicator. Fails only when the bootstrap does.
ncclResult_t weft_ras_comm_join(struct ncclComm *comm);
// The communicator leaves the report (before it is freed; safe for one that
// never joined). The thread stops, joined, with the last one.
void weft_ras_comm_leave(struct ncclComm *comm);

#endif
