/*
 * weft_parallel_example.c — a 3D-parallel training run with the parallel
 * layer: the ranks form a tp x pp x dp mesh (default 2 x 2 x 2), train the
 * small block model of parallel/mlpstack.h with tensor (optionally
 * sequence) parallel MLPs, a 1F1B pipeline and ZeRO data parallelism, and
 * rank 0 prints the loss and the pipeline bubble of each step.
 *
 *   NCCL_SOCKET_IFNAME=lo build/bin/weftrun -n 8 build/bin/weft-parallel-example
 *   ... weft-parallel-example --tp 2 --pp 2 --dp 2 --zero 3 --sp --gpipe --steps 5 --micro 4
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mesh.h"
#include "mlpstack.h"
#include "weft.h"

static int usage(const char *prog) {
  fprintf(stderr, "usage: %s [--tp N] [--pp N] [--dp N] [--zero 0..3] [--sp] [--gpipe] [--steps N] [--micro N]\n", prog);
  return 2;
}

int main(int argc, char **argv) {
  weft_mesh_shape_t shape = {2, 2, 2, 1};
  weft_mlpstack_config_t c = {.hidden = 32, .ffn = 128, .layers = 8, .tokens = 32, .micro = 4,
                              .zero = WEFT_DP_ZERO1, .schedule = WEFT_PP_1F1B, .seed = 1,
                              .adamw = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.01f}};
  int steps = 5;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--sp")) c.sequence_parallel = 1;
    else if (!strcmp(a, "--gpipe")) c.schedule = WEFT_PP_GPIPE;
    else if (v == NULL) return usage(argv[0]);
    else if (!strcmp(a, "--tp")) shape.tp = atoi(v), i++;
    else if (!strcmp(a, "--pp")) shape.pp = atoi(v), i++;
    else if (!strcmp(a, "--dp")) shape.dp = atoi(v), i++;
    else if (!strcmp(a, "--zero")) c.zero = (weft_dp_stage_t)atoi(v), i++;
    else if (!strcmp(a, "--steps")) steps = atoi(v), i++;
    else if (!strcmp(a, "--micro")) c.micro = atoi(v), i++;
    else return usage(argv[0]);
  }
  openblas_set_num_threads(1);
  ncclComm_t world = NULL;
  weft_mesh_t *mesh = NULL;
  weft_mlpstack_t *st = NULL;
  ncclResult_t res = weftInitFromEnv(&world);
  if (res == ncclSuccess) res = weft_mesh_create(world, shape, &mesh);
  if (res == ncclSuccess) res = weft_mlpstack_create(&c, mesh->tp_comm, mesh->pp_comm, mesh->dp_comm, &st);
  if (res == ncclSuccess && mesh->rank == 0)
    printf("mesh tp=%d pp=%d dp=%d (%d ranks), %s, ZeRO stage %d, %s, %d blocks of h=%d f=%d, %d micro-batches of %d tokens\n",
           shape.tp, shape.pp, shape.dp, mesh->nranks, c.sequence_parallel ? "sequence parallel" : "tensor parallel",
           (int)c.zero, c.schedule == WEFT_PP_1F1B ? "1F1B" : "GPipe", c.layers, c.hidden, c.ffn, c.micro, c.tokens);
  if (res == ncclSuccess) {
    int first, last;
    weft_mlpstack_blocks(st, &first, &last);
    printf("rank %d: tp %d pp %d dp %d, blocks %d..%d, %zu local parameters\n", mesh->rank, mesh->tp_rank,
           mesh->pp_rank, mesh->dp_rank, first, last - 1, weft_mlpstack_local_count(st));
    fflush(stdout);
  }
  for (int s = 0; s < steps && res == ncclSuccess; s++) {
    float loss = 0;
    weft_pp_stats_t stats;
    res = weft_mlpstack_step(st, &loss, &stats);
    if (res == ncclSuccess && mesh->rank == 0)
      printf("step %d  loss %.6f  bubble measured %.3f  (P-1)/M %.3f\n", s, loss, stats.bubble_measured,
             stats.bubble_formula);
  }
  weft_mlpstack_destroy(st);
  weft_mesh_destroy(mesh);
  if (world != NULL) ncclCommDestroy(world);
  if (res != ncclSuccess) fprintf(stderr, "weft-parallel-example: %s\n", ncclGetErrorString(res));
  return res == ncclSuccess ? 0 : 1;
}
