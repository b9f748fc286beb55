/*
 * data_internal.h — the data sources' state, shared by data.c (files,
 * dispatch) and data_add.c (the generated addition task).
 */
#ifndef WEFT_TRAINER_DATA_INTERNAL_H
#define WEFT_TRAINER_DATA_INTERNAL_H

#include <stdio.h>

#include "data.h"

typedef enum { DATA_KIND_ADD, DATA_KIND_BYTES, DATA_KIND_TOKENS } data_kind_t;

struct data {
  data_kind_t kind;
  int digits, vocab;
  unsigned long long seed;
  uint16_t *tokens;  // file sources: every token of the file
  long ntokens;      // the first 90% train, the rest is the validation split
  char describe[320];
};

unsigned long long data_hash(unsigned long long seed, unsigned long long a, unsigned long long b, unsigned long long c);
void data_add_sequence(const data_t *d, int split, long index, int seq, int *tokens);

#endif  // WEFT_TRAINER_DATA_INTERNAL_H
