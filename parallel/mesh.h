/*
 * mesh.h — the 3D process mesh: tensor, pipeline and data parallel groups.
 *
 * A job of tp * pp * dp ranks is laid out with TP innermost (consecutive
 * world ranks, so one TP group stays inside a host), then PP, then DP
 * outermost:  world = tp_rank + tp * (pp_rank + pp * dp_rank).
 * weft_mesh_create splits the world communicator with ncclCommSplit into
 * the three groups this rank belongs to. Context parallelism is part of
 * the shape for later; only cp = 1 is accepted now.
 */
#ifndef WEFT_PAR_MESH_H
#define WEFT_PAR_MESH_H

#include "nccl.h"

typedef struct {
  int tp, pp, dp;
  int cp;  // context parallel: must be 1 (0 is read as 1)
} weft_mesh_shape_t;

typedef struct {
  weft_mesh_shape_t shape;
  int rank, nranks;                  // in the world communicator
  int tp_rank, pp_rank, dp_rank;     // this rank's coordinates
  ncclComm_t world;                  // borrowed: not freed by weft_mesh_destroy
  ncclComm_t tp_comm, pp_comm, dp_comm;  // owned
} weft_mesh_t;

// Collective over `world`: every rank calls it with the same shape. Fails
// with ncclInvalidArgument (and a message) when a size is below 1, cp is
// not 1, or tp * pp * dp differs from the world size.
ncclResult_t weft_mesh_create(ncclComm_t world, weft_mesh_shape_t shape, weft_mesh_t **mesh);

// Frees the three group communicators and the mesh (NULL is ignored).
ncclResult_t weft_mesh_destroy(weft_mesh_t *mesh);

// World rank at the given coordinates, or -1 when one is out of range.
int weft_mesh_world_rank(const weft_mesh_t *mesh, int tp_rank, int pp_rank, int dp_rank);

#endif  // WEFT_PAR_MESH_H
