/*
 * redop.c — ncclRedOpCreatePreMulSum / ncclRedOpDestroy.
 *
 * A PreMulSum op is a slot in its communicator's table: the handle is
 * ncclNumOps + slot, and the scalar is captured at creation (host-immediate)
 * or read at creation from the pointer when it is host memory; a scalar in
 * device (or managed) memory is copied in stream order at each call, as
 * NCCL reads it when its kernel runs.
 */
#include <string.h>

#include "api.h"
#include "checks.h"
#include "comm.h"
#include "placement.h"
#include "dtype.h"

void weft_premul_read_scalar(const void *p, ncclDataType_t dt, weft_premul_t *pm) {
  weft_dtype_read_scalar(p, dt, &pm->scale_i, &pm->scale_f);
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  WEFTCHECK(weft_comm_check(comm, "ncclRedOpCreatePreMulSum"));
  if (op == NULL || scalar == NULL) {
    WARN("ncclRedOpCreatePreMulSum: %s is NULL", op == NULL ? "op" : "scalar");
    return ncclInvalidArgument;
  }
  if ((int)datatype < 0 || (int)datatype >= ncclNumTypes) {
    WARN("ncclRedOpCreatePreMulSum: datatype=%d is not a valid ncclDataType_t", (int)datatype);
    return ncclInvalidArgument;
  }
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    WARN("ncclRedOpCreatePreMulSum: residence=%d is not a valid ncclScalarResidence_t", (int)residence);
    return ncclInvalidArgument;
  }
  // A device-resident scalar is never dereferenced here: it may be GPU memory.
  int dev_scalar = residence == ncclScalarDevice && weft_cuda_scalar_on_device(scalar, weft_dtype_size(datatype));
  pthread_mutex_lock(&comm->lock);
  int slot = -1;
  for (int i = 0; i < WEFT_MAX_PREMUL_OPS && slot < 0; i++)
    if (!comm->premul[i].in_use) slot = i;
  if (slot >= 0) {
    weft_premul_t pm = {.in_use = 1, .dtype = datatype};
    if (dev_scalar) pm.dev_scalar = scalar;  // read in stream order at each call (src/cuda/cuda_stream.c)
    else weft_premul_read_scalar(scalar, datatype, &pm);
    comm->premul[slot] = pm;
  }
  pthread_mutex_unlock(&comm->lock);
  if (slot < 0) {
    WARN("ncclRedOpCreatePreMulSum: all %d custom ops of this communicator are in use", WEFT_MAX_PREMUL_OPS);
    return ncclInvalidUsage;
  }
  *op = (ncclRedOp_t)(ncclNumOps + slot);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  WEFTCHECK(weft_comm_check(comm, "ncclRedOpDestroy"));
  int slot = (int)op - ncclNumOps;
  pthread_mutex_lock(&comm->lock);
  int ok = slot >= 0 && slot < WEFT_MAX_PREMUL_OPS && comm->premul[slot].in_use;
  if (ok) comm->premul[slot].in_use = 0;
  pthread_mutex_unlock(&comm->lock);
  if (!ok) {
    WARN("ncclRedOpDestroy: op=%d is not a custom op of this communicator", (int)op);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}
