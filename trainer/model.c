/*
 * model.c — the GPT model's shapes, parameter layout, initialisation and
 * activations (see model.h); the passes themselves are in model_pass.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

int gpt_nlayers(const gpt_t *m) { return m->d.layers + 2; }

int gpt_rows(const gpt_t *m) { return m->rows; }

size_t gpt_layer_size(const gpt_t *m, int l) {
  size_t h = (size_t)m->d.hidden;
  if (l == 0) return (size_t)m->vrows * h + (size_t)m->d.seq * h;
  if (l == m->d.layers + 1) return 2 * h;
  if (gpt_is_moe(&m->d, l - 1)) return m->moe_block_np;
  return m->block_np;
}

size_t gpt_local_count(const gpt_t *m) {
  size_t n = 0;
  for (int l = 0; l < gpt_nlayers(m); l++) n += gpt_layer_size(m, l);
  return n;
}

size_t gpt_full_layer_size(const gpt_dims_t *d, int l) {
  size_t h = (size_t)d->hidden, f = (size_t)d->ffn;
  if (l == 0) return (size_t)d->vocab * h + (size_t)d->seq * h;
  if (l == d->layers + 1) return 2 * h;
  if (l >= d->layers + 2) return (size_t)d->experts * (h * f + f + f * h + h);  // one MoE block's experts
  if (gpt_is_moe(d, l - 1)) return 4 * h + (3 * h * h + 3 * h) + (h * h + h) + h * (size_t)d->experts;  // router
  return 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h);
}

size_t gpt_full_count(const gpt_dims_t *d) {
  size_t n = 0;
  for (int l = 0; l < d->layers + 2 + gpt_moe_blocks(d); l++) n += gpt_full_layer_size(d, l);
  return n;
}

double gpt_flops_per_token(const gpt_dims_t *d) {
  double h = d->hidden, f = d->ffn, L = d->layers;
  double matmul = L * (4 * h * h + 2 * h * f) + (double)d->vocab * h;  // QKV, out, MLP, LM head
  matmul += gpt_moe_flops_delta(d);                                      // MoE: k experts + router
  return 2 * matmul + L * 4 * (double)d->seq * h;                      // + QKᵀ and PV
}

// A standard normal from (seed, stream, index): splitmix64 and Box-Muller.
static unsigned long long mix(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static float normal(unsigned long long seed, unsigned long long stream, unsigned long long i) {
  unsigned long long z = mix(mix(seed ^ mix(stream)) ^ i);
  double u1 = ((double)(z >> 40) + 0.5) / 16777216.0, u2 = (double)(z & 0xffffff) / 16777216.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void fill_normal(float *w, size_t n, float std, unsigned long long seed, unsigned long long stream) {
  for (size_t i = 0; i < n; i++) w[i] = std * normal(seed, stream, i);
}

void gpt_fill_normal(float *w, size_t n, float std, unsigned long long seed, unsigned long long stream) {
  fill_normal(w, n, std, seed, stream);
}

void gpt_init_full(const gpt_dims_t *d, unsigned long long seed, float *full) {
  size_t h = (size_t)d->hidden, f = (size_t)d->ffn;
  float std = 0.02f, resid = 0.02f / sqrtf(2.0f * (float)d->layers);
  fill_normal(full, (size_t)d->vocab * h, std, seed, 1);                      // wte
  fill_normal(full + (size_t)d->vocab * h, (size_t)d->seq * h, std, seed, 2);  // wpe
  float *b = full + gpt_full_layer_size(d, 0);
  for (int l = 0; l < d->layers; b += gpt_full_layer_size(d, l + 1), l++) {
    unsigned long long s = 100 + 10 * (unsigned long long)l;
    memset(b, 0, gpt_full_layer_size(d, l + 1) * sizeof(float));
    float *ln1 = b, *qkv = ln1 + 2 * h, *wo = qkv + 3 * h * h + 3 * h, *ln2 = wo + h * h + h, *w1 = ln2 + 2 * h;
    float *w2 = w1 + h * f + f;
    for (size_t i = 0; i < h; i++) ln1[i] = ln2[i] = 1.0f;
    fill_normal(qkv, 3 * h * h, std, seed, s + 1);
    fill_normal(wo, h * h, resid, seed, s + 2);
    if (gpt_is_moe(d, l)) {  // the router in the MLP's place
      fill_normal(w1, h * (size_t)d->experts, std, seed, s + 5);
      continue;
    }
    fill_normal(w1, h * f, std, seed, s + 3);
    fill_normal(w2, f * h, resid, seed, s + 4);
  }
  for (size_t i = 0; i < h; i++) b[i] = 1.0f, b[h + i] = 0.0f;  // final LayerNorm
  gpt_moe_init_full(d, seed, b + 2 * h);                           // the experts' layers
}

ncclResult_t gpt_shard_full(const gpt_t *m, const float *full, float *local) {
  size_t h = (size_t)m->d.hidden;
  const weft_tp_t *tp = &m->tp;
  PAR_CHECK(weft_tp_vocab_shard(tp, m->d.vocab, m->d.hidden, full, local));
  memcpy(local + (size_t)m->vrows * h, full + (size_t)m->d.vocab * h, (size_t)m->d.seq * h * sizeof(float));
  full += gpt_full_layer_size(&m->d, 0);
  local += gpt_layer_size(m, 0);
  size_t full_attn = 3 * h * h + 3 * h + h * h + h;
  for (int l = 0; l < m->d.layers; l++) {
    memcpy(local, full, 2 * h * sizeof(float));
    PAR_CHECK(weft_tp_attn_shard(tp, &m->ad, full + 2 * h, local + m->attn_off));
    memcpy(local + m->ln2_off, full + 2 * h + full_attn, 2 * h * sizeof(float));
    if (gpt_is_moe(&m->d, l))  // the router, on every TP rank
      memcpy(local + m->mlp_off, full + 4 * h + full_attn, weft_moe_router_nparams(&m->moe) * sizeof(float));
    else
      PAR_CHECK(weft_tp_mlp_shard(tp, m->d.hidden, m->d.ffn, full + 4 * h + full_attn, local + m->mlp_off));
    full += gpt_full_layer_size(&m->d, l + 1);
    local += gpt_layer_size(m, l + 1);
  }
  memcpy(local, full, 2 * h * sizeof(float));
  return ncclSuccess;
}

static void fill(float *w, size_t n, float v) {
  for (size_t i = 0; i < n; i++) w[i] = v;
}

void gpt_norm_weights(const gpt_t *m, float *w) {
  size_t h = (size_t)m->d.hidden;
  float rep = 1.0f / (float)m->tp.size;  // a copy on every rank of the group
  fill(w, (size_t)m->vrows * h, 1.0f);
  fill(w + (size_t)m->vrows * h, (size_t)m->d.seq * h, rep);
  w += gpt_layer_size(m, 0);
  for (int l = 0; l < m->d.layers; w += gpt_layer_size(m, l + 1), l++) {
    fill(w, gpt_layer_size(m, l + 1), 1.0f);
    fill(w, 2 * h, rep);                                          // ln1
    fill(w + m->attn_off + m->attn_np - h, h, rep);               // output projection bias
    fill(w + m->ln2_off, 2 * h, rep);                             // ln2
    if (gpt_is_moe(&m->d, l))
      fill(w + m->mlp_off, weft_moe_router_nparams(&m->moe), rep);  // the router
    else
      fill(w + m->mlp_off + m->mlp_np - h, h, rep);               // second MLP bias
  }
  fill(w, 2 * h, rep);
}

size_t gpt_activation_bytes(const gpt_t *m) { return m->act_bytes; }

ncclResult_t gpt_create(const gpt_dims_t *d, int batch, const weft_tp_t *tp, gpt_t **out) {
  gpt_stage_t whole = {0, d->layers, 1, 1, 0};
  return gpt_create_stage(d, batch, tp, &whole, out);
}

ncclResult_t gpt_create_stage(const gpt_dims_t *d, int batch, const weft_tp_t *tp, const gpt_stage_t *stage,
                              gpt_t **out) {
  return gpt_create_parallel(d, batch, tp, NULL, stage, NULL, out);
}

ncclResult_t gpt_create_cp(const gpt_dims_t *d, int batch, const weft_tp_t *tp, const weft_cp_t *cp,
                           const gpt_stage_t *stage, gpt_t **out) {
  return gpt_create_parallel(d, batch, tp, cp, stage, NULL, out);
}

ncclResult_t gpt_create_ep(const gpt_dims_t *d, int batch, const weft_tp_t *tp, const gpt_stage_t *stage,
                           ncclComm_t ep_comm, gpt_t **out) {
  return gpt_create_parallel(d, batch, tp, NULL, stage, ep_comm, out);
}

ncclResult_t gpt_create_parallel(const gpt_dims_t *d, int batch, const weft_tp_t *tp, const weft_cp_t *cp,
                                 const gpt_stage_t *stage, ncclComm_t ep_comm, gpt_t **out) {
  *out = NULL;
  weft_cp_t one = {NULL, 1, 0, NULL};
  if (cp == NULL) cp = &one;
  if (weft_cp_check_seq(cp, "gpt (--cp, --seq)", d->seq) != ncclSuccess) return ncclInvalidArgument;
  if (d->vocab < 2 || d->seq < 1 || d->layers < 1 || d->hidden < 1 || d->heads < 1 || d->ffn < 1 || batch < 1)
    PAR_INVALID("gpt: bad shape vocab=%d seq=%d layers=%d hidden=%d heads=%d ffn=%d batch=%d", d->vocab, d->seq,
                d->layers, d->hidden, d->heads, d->ffn, batch);
  if (d->hidden % d->heads != 0) PAR_INVALID("gpt: hidden=%d is not a multiple of heads=%d", d->hidden, d->heads);
  if (d->heads % tp->size != 0 || d->ffn % tp->size != 0)
    PAR_INVALID("gpt: heads=%d and ffn=%d must be multiples of the tensor-parallel size %d", d->heads, d->ffn, tp->size);
  if (tp->sequence_parallel && (d->seq * batch) % tp->size != 0)
    PAR_INVALID("gpt: sequence parallelism needs the %d rows of a micro-batch (seq %d x batch %d) divisible by the "
                "tensor-parallel size %d", d->seq * batch, d->seq, batch, tp->size);
  if (stage->first < 0 || stage->last > d->layers || stage->first >= stage->last)
    PAR_INVALID("gpt: stage blocks %d..%d are not a non-empty part of 0..%d", stage->first, stage->last - 1, d->layers - 1);
  gpt_t *m = calloc(1, sizeof(*m));
  if (m == NULL) return weft_par_error(ncclSystemError, "gpt: out of memory");
  m->d = *d;
  m->stage = *stage;
  m->batch = batch;
  m->cp = *cp;
  m->T = weft_cp_local_seq(cp, d->seq) * batch;
  m->rows = weft_tp_local_rows(tp, m->T);
  m->tp = *tp;
  m->vrows = weft_tp_vocab_rows(tp, d->vocab);
  m->ad = (weft_tp_attn_dims_t){d->hidden, d->heads, d->seq, batch};
  size_t h = (size_t)d->hidden, T = (size_t)m->T, L = (size_t)(stage->last - stage->first);
  m->attn_np = weft_tp_attn_nparams(tp, &m->ad);
  m->mlp_np = weft_tp_mlp_nparams(tp, d->hidden, d->ffn);
  m->attn_off = 2 * h;
  m->ln2_off = m->attn_off + m->attn_np;
  m->mlp_off = m->ln2_off + 2 * h;
  m->block_np = m->mlp_off + m->mlp_np;
  m->ln_na = weft_tp_layernorm_nacts(d->hidden, m->rows);
  m->attn_na = gpt_attn_nacts(m);
  m->mlp_na = weft_tp_mlp_nacts(tp, d->hidden, d->ffn, m->T);
  ncclResult_t moe_res = gpt_moe_setup(m, ep_comm);
  if (moe_res != ncclSuccess) {
    gpt_destroy(m);
    return moe_res;
  }
  size_t th = T * h, tv = T * (size_t)m->vrows, rh = (size_t)m->rows * h, lnf = th + (tp->sequence_parallel ? rh : 0);
  m->ids = malloc(T * sizeof(int));
  m->targets = malloc(T * sizeof(int));
  size_t S = stage->recompute ? 1 : L;  // blocks with activations
  m->slots = (int)S;
  m->x = malloc((L + 1) * rh * sizeof(float));
  m->xmid = malloc(S * rh * sizeof(float));
  m->ln_out = malloc(2 * S * rh * sizeof(float));
  m->ln_acts = malloc((2 * S + 1) * m->ln_na * sizeof(float));
  m->attn_acts = malloc(S * m->attn_na * sizeof(float));
  m->mlp_acts = malloc(S * m->mlp_na * sizeof(float));
  m->act_bytes = sizeof(float) * ((L + 1) * rh + 3 * S * rh + (2 * S + 1) * m->ln_na + S * (m->attn_na + m->mlp_na) +
                                  lnf + 2 * tv);
  m->lnf_out = malloc(lnf * sizeof(float));
  m->logits = malloc(2 * tv * sizeof(float));  // logits | dlogits
  m->work = malloc((2 * th + 3 * T + 2 * T * (1 + (size_t)tp->size)) * sizeof(float));
  m->dwte = malloc((size_t)m->vrows * h * sizeof(float));
  if (!m->ids || !m->targets || !m->x || !m->xmid || !m->ln_out || !m->ln_acts || !m->attn_acts || !m->mlp_acts ||
      !m->lnf_out || !m->logits || !m->work || !m->dwte) {
    gpt_destroy(m);
    return weft_par_error(ncclSystemError, "gpt: out of memory for the activations of %d tokens", m->T);
  }
  *out = m;
  return ncclSuccess;
}

void gpt_destroy(gpt_t *m) {
  if (m == NULL) return;
  free(m->ids), free(m->targets), free(m->x), free(m->xmid), free(m->ln_out), free(m->ln_acts);
  free(m->attn_acts), free(m->mlp_acts), free(m->lnf_out), free(m->logits), free(m->work), free(m->dwte);
  free(m->moe_aux), free(m->moe_route_index);
  free(m);
}

// gpt_unshard: shards two vectors that encode each full index (plus one,
// so zero padding maps to nothing) as hi * 2^20 + lo, both exact in fp32,
// so the layout code in gpt_shard_full is the only place it is written.
ncclResult_t gpt_unshard(const gpt_t *m, int tp_rank, const float *local, float *full) {
  if (tp_rank < 0 || tp_rank >= m->tp.size) PAR_INVALID("gpt_unshard: tp_rank=%d of %d", tp_rank, m->tp.size);
  size_t nf = gpt_full_count(&m->d), nl = gpt_local_count(m);
  if (nf + 1 >= (size_t)1 << 44) PAR_INVALID("gpt_unshard: %zu parameters are too many", nf);
  float *enc = malloc(2 * (nf + nl) * sizeof(float));
  if (enc == NULL) return weft_par_error(ncclSystemError, "gpt_unshard: out of memory");
  float *hi = enc, *lo = enc + nf, *lhi = enc + 2 * nf, *llo = lhi + nl;
  for (size_t i = 0; i < nf; i++) hi[i] = (float)((i + 1) >> 20), lo[i] = (float)((i + 1) & 0xfffff);
  gpt_t other = *m;  // the same shapes, seen from tp_rank
  other.tp.rank = tp_rank;
  ncclResult_t res = gpt_shard_full(&other, hi, lhi);
  if (res == ncclSuccess) res = gpt_shard_full(&other, lo, llo);
  for (size_t i = 0; i < nl && res == ncclSuccess; i++) {
    size_t idx = ((size_t)lhi[i] << 20) + (size_t)llo[i];
    if (idx > 0) full[idx - 1] = local[i];
  }
  free(enc);
  return res;
}
