/*
 * net_ib_mr.c — the memory-registration cache of a verbs communicator.
 *
 * Registering memory with the HCA pins pages and costs tens of
 * microseconds, so buffers used again (the network transport's slots, a
 * user's buffer in a loop) keep their registration. Ranges are widened to
 * whole pages; a request inside an existing entry reuses it (a hit), any
 * other request registers its own pages (entries may overlap). Entries are
 * reference counted while operations use them; at most `max` are kept, and
 * beyond that the least recently used unreferenced ones are deregistered.
 * If every entry is in use the cache grows past max rather than fail.
 *
 * The cache belongs to one communicator and is emptied when it closes, so
 * a registration never outlives the buffers it was made for (memory freed
 * and mapped again at the same address must not reuse old pinned pages).
 * The register/deregister functions come from a table so tests can run
 * the logic without an HCA.
 */
#include <stdlib.h>
#include <string.h>

#include "net_ib.h"

void weft_ib_mr_cache_init(weft_ib_mr_cache_t *c, const weft_ib_mr_ops_t *ops, int max, size_t page) {
  memset(c, 0, sizeof(*c));
  c->ops = *ops;
  c->max = max > 0 ? max : 1;
  c->page = page ? page : 4096;
}

static void drop(weft_ib_mr_cache_t *c, int i) {
  c->ops.dereg(c->ops.ctx, c->e[i]->handle);
  free(c->e[i]);
  c->e[i] = c->e[--c->n];
}

// Deregister least recently used unreferenced entries until at most `keep` remain.
static void evict(weft_ib_mr_cache_t *c, int keep) {
  while (c->n > keep) {
    int victim = -1;
    for (int i = 0; i < c->n; i++)
      if (c->e[i]->refs == 0 && (victim < 0 || c->e[i]->last_use < c->e[victim]->last_use)) victim = i;
    if (victim < 0) return;  // all in use
    drop(c, victim);
    c->evictions++;
  }
}

const weft_ib_mr_t *weft_ib_mr_get(weft_ib_mr_cache_t *c, const void *addr, size_t len) {
  uintptr_t a = (uintptr_t)addr;
  uintptr_t start = a & ~(uintptr_t)(c->page - 1);
  if (len == 0) len = 1;
  if (a + len < a) return NULL;  // wraps the address space
  uintptr_t end = (a + len + c->page - 1) & ~(uintptr_t)(c->page - 1);
  for (int i = 0; i < c->n; i++) {
    weft_ib_mr_t *m = c->e[i];
    if (m->start <= start && end <= m->start + m->len) {
      m->refs++;
      m->last_use = ++c->clock;
      c->hits++;
      return m;
    }
  }
  c->misses++;
  evict(c, c->max - 1);
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 16;
    weft_ib_mr_t **e = realloc(c->e, (size_t)cap * sizeof(*e));
    if (e == NULL) return NULL;
    c->e = e, c->cap = cap;
  }
  weft_ib_mr_t *m = calloc(1, sizeof(*m));
  if (m == NULL) return NULL;
  m->start = start;
  m->len = end - start;
  m->handle = c->ops.reg(c->ops.ctx, (void *)start, m->len, &m->lkey, &m->rkey);
  if (m->handle == NULL) {
    free(m);
    return NULL;
  }
  m->refs = 1;
  m->last_use = ++c->clock;
  c->e[c->n++] = m;
  return m;
}

void weft_ib_mr_put(weft_ib_mr_cache_t *c, const weft_ib_mr_t *mr) {
  if (mr == NULL) return;
  for (int i = 0; i < c->n; i++)
    if (c->e[i] == mr) {
      if (c->e[i]->refs > 0) c->e[i]->refs--;
      break;
    }
  evict(c, c->max);
}

int weft_ib_mr_cache_free(weft_ib_mr_cache_t *c) {
  int busy = 0;
  while (c->n > 0) {
    busy += c->e[c->n - 1]->refs > 0;
    drop(c, c->n - 1);
  }
  free(c->e);
  c->e = NULL;
  c->cap = 0;
  return busy;
}
