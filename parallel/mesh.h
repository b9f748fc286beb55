/*
 * mesh.h — the process mesh: tensor, context, pipeline and data parallel
 * groups.
 *
 * A job of tp * cp * pp * dp ranks is laid out with TP innermost
 * (consecutive world ranks, so one TP group stays inside a host), then CP
 * (its ring exchanges a layer's keys and values, the next-heaviest
 * traffic), then PP, then DP outermost:
 *   world = tp_rank + tp * (cp_rank + cp * (pp_rank + pp * dp_rank)).
 * With cp = 1 this is the 3D layout tp_rank + tp * (pp_rank + pp * dp_rank).
 * weft_mesh_create splits the world communicator with ncclCommSplit into
 * the groups this rank belongs to, and the data-parallel x context-parallel
 * group over which parameter gradients are reduced (every rank of it holds
 * the same parameters and sees different tokens).
 */
#ifndef WEFT_PAR_MESH_H
#define WEFT_PAR_MESH_H

#include "nccl.h"

typedef struct {
  int tp, pp, dp;
  int cp;  // context parallel (0 is read as 1)
} weft_mesh_shape_t;

typedef struct {
  weft_mesh_shape_t shape;
  int rank, nranks;                  // in the world communicator
  int tp_rank, pp_rank, dp_rank;     // this rank's coordinates
  ncclComm_t world;                  // borrowed: not freed by weft_mesh_destroy
  ncclComm_t tp_comm, pp_comm, dp_comm;  // owned
  int cp_rank;
  ncclComm_t cp_comm;     // owned
  ncclComm_t dp_cp_comm;  // DP x CP (rank cp_rank + cp * dp_rank); dp_comm itself when cp = 1
} weft_mesh_t;

// Collective over `world`: every rank calls it with the same shape. Fails
// with ncclInvalidArgument (and a message) when a size is below 1 or
// tp * cp * pp * dp differs from the world size.
ncclResult_t weft_mesh_create(ncclComm_t world, weft_mesh_shape_t shape, weft_mesh_t **mesh);

// Frees the group communicators and the mesh (NULL is ignored).
ncclResult_t weft_mesh_destroy(weft_mesh_t *mesh);

// World rank at the given coordinates, or -1 when one is out of range.
int weft_mesh_world_rank(const weft_mesh_t *mesh, int tp_rank, int pp_rank, int dp_rank);  // at this rank's cp_rank
int weft_mesh_world_rank_cp(const weft_mesh_t *mesh, int tp_rank, int cp_rank, int pp_rank, int dp_rank);

#endif  // WEFT_PAR_MESH_H
