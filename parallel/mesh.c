/*
 * mesh.c — builds the TP, PP and DP communicators of a 3D mesh with
 * ncclCommSplit (see mesh.h for the rank layout).
 *
 * Each split colours a rank by its coordinates along the two other axes and
 * keys it by its coordinate along the group's own axis, so group rank i is
 * the member with coordinate i.
 */
#include "mesh.h"

#include <stdlib.h>

#include "par_util.h"

static ncclResult_t check_shape(ncclComm_t world, weft_mesh_shape_t *shape, int *rank, int *nranks) {
  if (world == NULL) PAR_INVALID("weft_mesh_create: world communicator is NULL");
  if (shape->cp == 0) shape->cp = 1;
  if (shape->tp < 1 || shape->pp < 1 || shape->dp < 1)
    PAR_INVALID("weft_mesh_create: every size must be at least 1 (tp=%d pp=%d dp=%d)", shape->tp, shape->pp,
                shape->dp);
  if (shape->cp != 1) PAR_INVALID("weft_mesh_create: cp=%d, only cp=1 is supported", shape->cp);
  PAR_CHECK(ncclCommCount(world, nranks));
  PAR_CHECK(ncclCommUserRank(world, rank));
  long want = (long)shape->tp * shape->pp * shape->dp;
  if (want != *nranks)
    PAR_INVALID("weft_mesh_create: tp*pp*dp = %d*%d*%d = %ld, but the communicator has %d ranks", shape->tp,
                shape->pp, shape->dp, want, *nranks);
  return ncclSuccess;
}

ncclResult_t weft_mesh_create(ncclComm_t world, weft_mesh_shape_t shape, weft_mesh_t **mesh) {
  if (mesh == NULL) PAR_INVALID("weft_mesh_create: mesh is NULL");
  *mesh = NULL;
  int rank = 0, nranks = 0;
  ncclResult_t res = check_shape(world, &shape, &rank, &nranks);
  if (res != ncclSuccess) return res;
  weft_mesh_t *m = calloc(1, sizeof(*m));
  if (m == NULL) return weft_par_error(ncclSystemError, "weft_mesh_create: out of memory");
  m->shape = shape;
  m->rank = rank;
  m->nranks = nranks;
  m->world = world;
  m->tp_rank = rank % shape.tp;
  m->pp_rank = (rank / shape.tp) % shape.pp;
  m->dp_rank = rank / (shape.tp * shape.pp);
  PAR_CHECK_GOTO(ncclCommSplit(world, m->pp_rank + shape.pp * m->dp_rank, m->tp_rank, &m->tp_comm, NULL), res,
                 fail);
  PAR_CHECK_GOTO(ncclCommSplit(world, m->tp_rank + shape.tp * m->dp_rank, m->pp_rank, &m->pp_comm, NULL), res,
                 fail);
  PAR_CHECK_GOTO(ncclCommSplit(world, m->tp_rank + shape.tp * m->pp_rank, m->dp_rank, &m->dp_comm, NULL), res,
                 fail);
  *mesh = m;
  return ncclSuccess;
fail:
  weft_mesh_destroy(m);
  return res;
}

ncclResult_t weft_mesh_destroy(weft_mesh_t *mesh) {
  if (mesh == NULL) return ncclSuccess;
  ncclResult_t res = ncclSuccess, r;
  ncclComm_t comms[3] = {mesh->tp_comm, mesh->pp_comm, mesh->dp_comm};
  for (int i = 0; i < 3; i++)
    if (comms[i] != NULL && (r = ncclCommDestroy(comms[i])) != ncclSuccess && res == ncclSuccess) res = r;
  free(mesh);
  return res;
}

int weft_mesh_world_rank(const weft_mesh_t *mesh, int tp_rank, int pp_rank, int dp_rank) {
  if (mesh == NULL) return -1;
  const weft_mesh_shape_t *s = &mesh->shape;
  if (tp_rank < 0 || tp_rank >= s->tp || pp_rank < 0 || pp_rank >= s->pp || dp_rank < 0 || dp_rank >= s->dp)
    return -1;
  return tp_rank + s->tp * (pp_rank + s->pp * dp_rank);
}
