/*
 * test_parallel_interleaved.c — the interleaved 1F1B schedule without
 * ranks: the order written out by hand for P = 2, V = 2, M = 4; for a grid
 * of (P, V, M), every chunk's micro-batches once forward then backward in
 * micro-batch order, the warm-up count, the activations each chunk holds;
 * the simulated bubble equal to (P-1)/(V*M); and the executor's plan
 * played against itself with rendezvous semantics (a group completes only
 * when the peer of each of its sends and receives has posted the match,
 * matching in order per pair of stages): every message pairs with the
 * right one, arrives before its operation runs, and nothing deadlocks.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp.h"
#include "pp_interleaved.h"

static const int grid_p[] = {1, 2, 3, 4, 8}, grid_v[] = {1, 2, 3, 4};

#define FOR_GRID(P, V, M)                                                 \
  for (size_t ip_ = 0; ip_ < sizeof(grid_p) / sizeof(int); ip_++)         \
    for (size_t iv_ = 0; iv_ < sizeof(grid_v) / sizeof(int); iv_++)       \
      for (int mul_ = 1, P = grid_p[ip_], V = grid_v[iv_], M = P; mul_ <= 4; mul_ *= 2, M = mul_ * P)

Test(parallel_interleaved, order_for_two_stages_two_chunks_four_micro_batches, .timeout = 10) {
  // "F12" = forward of chunk 1, micro-batch 2.
  const char *want[2] = {"F00 F01 F10 F11 F02 B10 F03 B11 F12 B00 F13 B01 B12 B13 B02 B03",
                         "F00 F01 F10 B10 F11 B11 F02 B00 F03 B01 F12 B12 F13 B13 B02 B03"};
  for (int s = 0; s < 2; s++) {
    weft_pp_chunk_op_t ops[16];
    cr_assert_eq(weft_pp_interleaved_schedule(2, s, 2, 4, ops), ncclSuccess);
    char got[128] = "";
    for (int i = 0; i < 16; i++)
      snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%c%d%d", i ? " " : "", ops[i].backward ? 'B' : 'F',
               ops[i].chunk, ops[i].micro);
    cr_expect_str_eq(got, want[s], "stage %d", s);
  }
  cr_expect_eq(weft_pp_interleaved_warmup(2, 0, 2, 4), 4);
  cr_expect_eq(weft_pp_interleaved_warmup(2, 1, 2, 4), 2);
  cr_expect_eq(weft_pp_interleaved_warmup(4, 0, 3, 4), 12, "capped at V*M");
}

Test(parallel_interleaved, schedules_are_complete_ordered_and_bounded, .timeout = 20) {
  FOR_GRID(P, V, M) {
    int n = 2 * V * M;
    weft_pp_chunk_op_t *ops = malloc((size_t)n * sizeof(*ops));
    int *fwd = calloc((size_t)V * M, sizeof(int)), *bwd = calloc((size_t)V * M, sizeof(int));
    int *last_f = malloc((size_t)V * sizeof(int)), *last_b = malloc((size_t)V * sizeof(int));
    int *held = malloc((size_t)V * sizeof(int)), *now = calloc((size_t)V, sizeof(int)), *most = calloc((size_t)V, sizeof(int));
    for (int s = 0; s < P; s++) {
      cr_assert_eq(weft_pp_interleaved_schedule(P, s, V, M, ops), ncclSuccess, "P=%d s=%d V=%d M=%d", P, s, V, M);
      for (int i = 0; i < V * M; i++) fwd[i] = bwd[i] = 0;
      for (int v = 0; v < V; v++) last_f[v] = last_b[v] = -1, now[v] = most[v] = 0;
      int warm = -1, ok = 1;
      for (int i = 0; i < n; i++) {
        const weft_pp_chunk_op_t *op = &ops[i];
        ok &= op->chunk >= 0 && op->chunk < V && op->micro >= 0 && op->micro < M;
        if (!ok) break;
        int k = op->chunk * M + op->micro;
        if (op->backward) {
          if (warm < 0) warm = i;
          ok &= fwd[k] == 1 && bwd[k] == 0 && op->micro == last_b[op->chunk] + 1;
          bwd[k]++, last_b[op->chunk] = op->micro, now[op->chunk]--;
        } else {
          ok &= fwd[k] == 0 && op->micro == last_f[op->chunk] + 1;
          fwd[k]++, last_f[op->chunk] = op->micro, now[op->chunk]++;
          most[op->chunk] = now[op->chunk] > most[op->chunk] ? now[op->chunk] : most[op->chunk];
        }
      }
      cr_expect(ok, "P=%d s=%d V=%d M=%d: an operation out of place", P, s, V, M);
      int w = (P - 1 - s) * 2 + (V - 1) * P;
      // W warm-up forwards, then the first pair's forward before the first backward
      cr_expect_eq(warm, w < V * M ? w + 1 : V * M, "P=%d s=%d V=%d M=%d: %d forwards first", P, s, V, M, warm);
      cr_assert_eq(weft_pp_interleaved_in_flight(P, s, V, M, held), ncclSuccess);
      for (int v = 0; v < V; v++) {
        cr_expect_eq(held[v], most[v], "P=%d s=%d V=%d M=%d chunk %d", P, s, V, M, v);
        cr_expect(held[v] >= 1 && held[v] <= M);
      }
      if (V == 1) cr_expect_eq(held[0], w + 1 < M ? w + 1 : M, "one chunk: the warm-up plus one");
    }
    free(ops), free(fwd), free(bwd), free(last_f), free(last_b), free(held), free(now), free(most);
  }
}

Test(parallel_interleaved, simulated_bubble_is_p_minus_1_over_v_m, .timeout = 20) {
  printf("\nInterleaved 1F1B bubble (idle/busy), simulated with tb = 2 tf, P = 4:\n");
  FOR_GRID(P, V, M) {
    for (int ratio = 1; ratio <= 2; ratio++) {
      double b = -1, want = (double)(P - 1) / ((double)V * M);
      cr_assert_eq(weft_pp_interleaved_simulate(P, V, M, 1.0, ratio, &b), ncclSuccess);
      cr_expect(fabs(b - want) < 1e-12, "P=%d V=%d M=%d tb=%d tf: bubble %g, (P-1)/(V*M) = %g", P, V, M, ratio, b,
                want);
      if (P == 4 && ratio == 2) printf("  V=%d M=%2d  bubble %.4f  (P-1)/(V*M) %.4f\n", V, M, b, want);
    }
  }
  double one = 0, plain = 0;  // V = 1 leaves 1F1B's bubble
  cr_assert_eq(weft_pp_interleaved_simulate(4, 1, 8, 1.0, 2.0, &one), ncclSuccess);
  cr_assert_eq(weft_pp_simulate(WEFT_PP_1F1B, 4, 8, 1.0, 2.0, &plain), ncclSuccess);
  cr_expect(fabs(one - plain) < 1e-12, "V=1 %g, 1F1B %g", one, plain);
}

// One send or receive of a stage's plan: the pair of stages, its place
// in their order, and the message (backward?, producing virtual stage,
// micro-batch) it carries.
typedef struct {
  int send, src, dst, seq, tag;
} item_t;

typedef struct {
  item_t *items;
  int *group_of;  // per item: its group on its stage
  int n;
} stage_plan_t;

static int tag_of(int backward, int vs, int micro) { return (backward * 4096 + vs) * 4096 + micro; }

// Plays the plans of all stages against each other; 1 when every group completes.
static int rendezvous(stage_plan_t *sp, int *groups, int P) {
  int *pos = calloc((size_t)P, sizeof(int)), done = 0, progress = 1;
  while (progress) {
    progress = 0;
    done = 1;
    for (int s = 0; s < P; s++) {
      while (pos[s] < groups[s]) {
        int ok = 1;
        for (int i = 0; i < sp[s].n && ok; i++) {
          const item_t *it = &sp[s].items[i];
          if (sp[s].group_of[i] != pos[s]) continue;
          int peer = it->send ? it->dst : it->src, found = 0;
          for (int j = 0; j < sp[peer].n && !found; j++) {
            const item_t *o = &sp[peer].items[j];
            if (o->send != it->send && o->src == it->src && o->dst == it->dst && o->seq == it->seq) {
              found = 1;
              ok = pos[peer] >= sp[peer].group_of[j];  // the peer has posted it
            }
          }
          ok &= found;
        }
        if (!ok) break;
        pos[s]++;
        progress = 1;
      }
      done &= pos[s] == groups[s];
    }
  }
  free(pos);
  return done;
}

static void check_plan(int P, int V, int M) {
  int n = 2 * V * M, nv = P * V, rounds0 = -1;
  stage_plan_t *sp = calloc((size_t)P, sizeof(*sp));
  int *groups = calloc((size_t)P, sizeof(int)), *sent = calloc((size_t)P * P, sizeof(int));
  int *recvd = calloc((size_t)P * P, sizeof(int));
  weft_pp_chunk_op_t *ops = malloc((size_t)n * sizeof(*ops));
  for (int s = 0; s < P; s++) {
    weft_pp_round_t *rounds = NULL;
    int nr = 0;
    cr_assert_eq(weft_pp_interleaved_plan(P, s, V, M, &rounds, &nr), ncclSuccess, "P=%d V=%d M=%d", P, V, M);
    cr_assert_eq(weft_pp_interleaved_schedule(P, s, V, M, ops), ncclSuccess);
    if (rounds0 < 0) rounds0 = nr;
    cr_expect_eq(nr, rounds0, "P=%d V=%d M=%d: stage %d has %d rounds, stage 0 %d", P, V, M, s, nr, rounds0);
    sp[s].items = calloc((size_t)3 * nr, sizeof(item_t));
    sp[s].group_of = calloc((size_t)3 * nr, sizeof(int));
    int *ran_at = malloc((size_t)n * sizeof(int)), *input_at = malloc((size_t)n * sizeof(int)), next = 0;
    for (int j = 0; j < n; j++) ran_at[j] = input_at[j] = -1;
    for (int r = 0; r < nr; r++) {
      const weft_pp_round_t *rd = &rounds[r];
      int in_group = 0, made = -1;
      if (rd->op >= 0) {
        cr_expect_eq(rd->op, next, "P=%d V=%d M=%d stage %d round %d runs op %d, the schedule's next is %d", P, V, M,
                     s, r, rd->op, next);
        next = rd->op + 1;
        ran_at[rd->op] = r;
        const weft_pp_chunk_op_t *op = &ops[rd->op];
        made = tag_of(op->backward, op->chunk * P + s, op->micro);
      } else {
        cr_expect_eq(rd->send_to, -1, "a round without an operation sends nothing");
      }
      for (int i = 0; i < rd->nrecv; i++) {
        int j = rd->recv_for[i], from = rd->recv_from[i];
        const weft_pp_chunk_op_t *op = &ops[j];
        int vs = op->chunk * P + s, src_vs = op->backward ? vs + 1 : vs - 1;
        cr_expect(src_vs >= 0 && src_vs < nv && src_vs % P == from, "P=%d V=%d M=%d: input of op %d from stage %d", P,
                  V, M, j, from);
        input_at[j] = r;
        int tag = tag_of(op->backward, src_vs, op->micro);
        if (from == s) {  // handed over to itself
          cr_expect_eq(tag, made, "a result kept by the stage is the one it made");
          continue;
        }
        sp[s].items[sp[s].n] = (item_t){0, from, s, recvd[from * P + s]++, tag};
        sp[s].group_of[sp[s].n++] = groups[s], in_group = 1;
      }
      if (rd->send_to >= 0 && rd->send_to != s) {
        sp[s].items[sp[s].n] = (item_t){1, s, rd->send_to, sent[s * P + rd->send_to]++, made};
        sp[s].group_of[sp[s].n++] = groups[s], in_group = 1;
      }
      groups[s] += in_group;
    }
    cr_expect_eq(next, n, "P=%d V=%d M=%d stage %d ran %d of %d operations", P, V, M, s, next, n);
    for (int j = 0; j < n; j++) {
      const weft_pp_chunk_op_t *op = &ops[j];
      int vs = op->chunk * P + s, needs = op->backward ? vs < nv - 1 : vs > 0;
      if (needs)
        cr_expect(input_at[j] >= 0 && input_at[j] < ran_at[j], "P=%d V=%d M=%d stage %d op %d: input in round %d, run in %d",
                  P, V, M, s, j, input_at[j], ran_at[j]);
      else
        cr_expect_eq(input_at[j], -1);
    }
    free(rounds), free(ran_at), free(input_at);
  }
  // In-order matching pairs each send with the receive of the same message.
  for (int s = 0; s < P; s++)
    for (int i = 0; i < sp[s].n; i++) {
      const item_t *it = &sp[s].items[i];
      if (!it->send) continue;
      int found = 0;
      for (int j = 0; j < sp[it->dst].n; j++) {
        const item_t *o = &sp[it->dst].items[j];
        if (!o->send && o->src == s && o->seq == it->seq) {
          found = 1;
          cr_expect_eq(o->tag, it->tag, "P=%d V=%d M=%d: send %d from %d to %d meets another message", P, V, M, it->seq,
                       s, it->dst);
        }
      }
      cr_expect(found, "P=%d V=%d M=%d: send %d from %d to %d has no receive", P, V, M, it->seq, s, it->dst);
    }
  for (int i = 0; i < P * P; i++) cr_expect_eq(sent[i], recvd[i], "as many sends as receives per pair");
  cr_expect(rendezvous(sp, groups, P), "P=%d V=%d M=%d: the plan deadlocks", P, V, M);
  for (int s = 0; s < P; s++) free(sp[s].items), free(sp[s].group_of);
  free(sp), free(groups), free(sent), free(recvd), free(ops);
}

// The checker itself: two stages that each receive before they send wait forever.
Test(parallel_interleaved, rendezvous_check_sees_a_deadlock, .timeout = 10) {
  item_t a[2] = {{0, 1, 0, 0, 7}, {1, 0, 1, 0, 8}}, b[2] = {{0, 0, 1, 0, 8}, {1, 1, 0, 0, 7}};
  int ga[2] = {0, 1}, gb[2] = {0, 1}, groups[2] = {2, 2};
  stage_plan_t sp[2] = {{a, ga, 2}, {b, gb, 2}};
  cr_expect_not(rendezvous(sp, groups, 2), "receive-then-send on both sides deadlocks");
  int together[2] = {0, 0}, one[2] = {1, 1};  // both in one group each: completes
  stage_plan_t sp2[2] = {{a, together, 2}, {b, together, 2}};
  cr_expect(rendezvous(sp2, one, 2));
}

Test(parallel_interleaved, plan_pairs_every_message_and_never_deadlocks, .timeout = 60) {
  FOR_GRID(P, V, M) check_plan(P, V, M);
}

Test(parallel_interleaved, bad_arguments_are_refused, .timeout = 10) {
  weft_pp_chunk_op_t ops[64];
  weft_pp_round_t *rounds = NULL;
  int nr = 0, held[4];
  double b;
  cr_expect_eq(weft_pp_interleaved_check(2, 2, 3), ncclInvalidArgument, "M not a multiple of P");
  cr_expect_eq(weft_pp_interleaved_check(2, 0, 4), ncclInvalidArgument);
  cr_expect_eq(weft_pp_interleaved_check(0, 2, 4), ncclInvalidArgument);
  cr_expect_eq(weft_pp_interleaved_check(2, 2, 0), ncclInvalidArgument);
  cr_expect_eq(weft_pp_interleaved_check(4, 3, 8), ncclSuccess);
  cr_expect_eq(weft_pp_interleaved_schedule(2, 2, 2, 2, ops), ncclInvalidArgument, "stage out of range");
  cr_expect_eq(weft_pp_interleaved_schedule(2, 0, 2, 2, NULL), ncclInvalidArgument);
  cr_expect_eq(weft_pp_interleaved_in_flight(2, 0, 2, 2, NULL), ncclInvalidArgument);
  cr_expect_eq(weft_pp_interleaved_in_flight(2, 0, 2, 3, held), ncclInvalidArgument);
  cr_expect_eq(weft_pp_interleaved_simulate(2, 2, 2, 0.0, 1.0, &b), ncclInvalidArgument);
  cr_expect_eq(weft_pp_interleaved_simulate(2, 2, 2, 1.0, 1.0, NULL), ncclInvalidArgument);
  cr_expect_eq(weft_pp_interleaved_plan(2, 0, 2, 2, NULL, &nr), ncclInvalidArgument);
  cr_expect_eq(weft_pp_interleaved_plan(2, -1, 2, 2, &rounds, &nr), ncclInvalidArgument);
  cr_expect_null(rounds);
  cr_expect_eq(weft_pp_interleaved_run(NULL, 2, 2, 8, NULL, NULL), ncclInvalidArgument);
  weft_pp_op_t plain[8];
  cr_expect_eq(weft_pp_schedule(WEFT_PP_INTERLEAVED, 2, 0, 4, plain), ncclInvalidArgument, "the one-chunk calls refuse it");
}
