/*
 * mesh.c — builds the TP, CP, PP and DP communicators of the mesh (and the
 * DP x CP one) with ncclCommSplit (see mesh.h for the rank layout).
 *
 * Each split colours a rank by its coordinates along the other axes and
 * keys it by its coordinate along the group's own axis, so group rank i is
 * the member with coordinate i.
 */
#include "mesh.h"

#include <stdlib.h>

#include "par_util.h"

static ncclResult_t check_shape(ncclComm_t world, weft_mesh_shape_t *shape, int *rank, int *nranks) {
  if (world == NULL) PAR_INVALID("weft_mesh_create: world communicator is NULL");
  if (shape->cp == 0) shape->cp = 1;
  if (shape->tp < 1 || shape->pp < 1 || shape->dp < 1 || shape->cp < 1)
    PAR_INVALID("weft_mesh_create: every size must be at least 1 (tp=%d cp=%d pp=%d dp=%d)", shape->tp, shape->cp,
                shape->pp, shape->dp);
  PAR_CHECK(ncclCommCount(world, nranks));
  PAR_CHECK(ncclCommUserRank(world, rank));
  long want = (long)shape->tp * shape->cp * shape->pp * shape->dp;
  if (want != *nranks)
    PAR_INVALID("weft_mesh_create: tp*cp*pp*dp = %d*%d*%d*%d = %ld, but the communicator has %d ranks", shape->tp,
                shape->cp, shape->pp, shape->dp, want, *nranks);
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
  int tp = shape.tp, cp = shape.cp, pp = shape.pp;
  m->tp_rank = rank % tp;
  m->cp_rank = (rank / tp) % cp;
  m->pp_rank = (rank / (tp * cp)) % pp;
  m->dp_rank = rank / (tp * cp * pp);
  int tp_r = m->tp_rank, cp_r = m->cp_rank, pp_r = m->pp_rank, dp_r = m->dp_rank;
  PAR_CHECK_GOTO(ncclCommSplit(world, cp_r + cp * (pp_r + pp * dp_r), tp_r, &m->tp_comm, NULL), res, fail);
  PAR_CHECK_GOTO(ncclCommSplit(world, tp_r + tp * (pp_r + pp * dp_r), cp_r, &m->cp_comm, NULL), res, fail);
  PAR_CHECK_GOTO(ncclCommSplit(world, tp_r + tp * (cp_r + cp * dp_r), pp_r, &m->pp_comm, NULL), res, fail);
  PAR_CHECK_GOTO(ncclCommSplit(world, tp_r + tp * (cp_r + cp * pp_r), dp_r, &m->dp_comm, NULL), res, fail);
  m->dp_cp_comm = m->dp_comm;
  if (cp > 1) {
    m->dp_cp_comm = NULL;
    PAR_CHECK_GOTO(ncclCommSplit(world, tp_r + tp * pp_r, cp_r + cp * dp_r, &m->dp_cp_comm, NULL), res, fail);
  }
  *mesh = m;
  return ncclSuccess;
fail:
  weft_mesh_destroy(m);
  return res;
}

ncclResult_t weft_mesh_destroy(weft_mesh_t *mesh) {
  if (mesh == NULL) return ncclSuccess;
  ncclResult_t res = ncclSuccess, r;
  ncclComm_t comms[5] = {mesh->tp_comm, mesh->pp_comm, mesh->dp_comm, mesh->cp_comm,
                         mesh->dp_cp_comm != mesh->dp_comm ? mesh->dp_cp_comm : NULL};
  for (int i = 0; i < 5; i++)
    if (comms[i] != NULL && (r = ncclCommDestroy(comms[i])) != ncclSuccess && res == ncclSuccess) res = r;
  free(mesh);
  return res;
}

int weft_mesh_world_rank(const weft_mesh_t *mesh, int tp_rank, int pp_rank, int dp_rank) {
  return mesh == NULL ? -1 : weft_mesh_world_rank_cp(mesh, tp_rank, mesh->cp_rank, pp_rank, dp_rank);
}

int weft_mesh_world_rank_cp(const weft_mesh_t *mesh, int tp_rank, int cp_rank, int pp_rank, int dp_rank) {
  if (mesh == NULL) return -1;
  const weft_mesh_shape_t *s = &mesh->shape;
  if (tp_rank < 0 || tp_rank >= s->tp || cp_rank < 0 || cp_rank >= s->cp || pp_rank < 0 || pp_rank >= s->pp ||
      dp_rank < 0 || dp_rank >= s->dp)
    return -1;
  return tp_rank + s->tp * (cp_rank + s->cp * (pp_rank + s->pp * dp_rank));
}
