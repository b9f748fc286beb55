/*
 * data_add.c — the generated task: multi-digit additions "a+b=c\n" packed
 * back to back into sequences that start at a problem boundary. Learning
 * shows in the exact-match accuracy of greedily decoded answers to
 * held-out problems (train.c); the loss also counts the random operand
 * digits, so it falls towards about (2 digits · ln 10) / problem length.
 */
#include "data_internal.h"

static unsigned long long mix(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

unsigned long long data_hash(unsigned long long seed, unsigned long long a, unsigned long long b,
                             unsigned long long c) {
  return mix(mix(mix(seed ^ mix(a)) ^ b) ^ c);
}

int data_is_addition(const data_t *d) { return d->kind == DATA_KIND_ADD; }

static long power10(int digits) {
  long p = 1;
  for (int i = 0; i < digits; i++) p *= 10;
  return p;
}

static int held_out(long a, long b) { return mix((unsigned long long)a * 1000003ull + (unsigned long long)b) % 10 == 0; }

void data_add_problem(const data_t *d, int split, long index, long *a, long *b) {
  long range = power10(d->digits);
  for (unsigned long long j = 0;; j++) {  // rejection: ~10% of pairs are held out
    unsigned long long z = data_hash(d->seed, 77 + (unsigned long long)split, (unsigned long long)index, j);
    *a = (long)((z & 0xffffffffull) % (unsigned long long)range);
    *b = (long)((z >> 32) % (unsigned long long)range);
    if (held_out(*a, *b) == (split == DATA_VAL)) return;
  }
}

static int put_number(long v, int *tokens) {
  char text[24];
  int n = snprintf(text, sizeof(text), "%ld", v);
  for (int i = 0; i < n; i++) tokens[i] = text[i] - '0';
  return n;
}

int data_add_prompt(long a, long b, int *tokens) {
  int n = 0;
  tokens[n++] = ADD_NEWLINE;
  n += put_number(a, tokens + n);
  tokens[n++] = ADD_PLUS;
  n += put_number(b, tokens + n);
  tokens[n++] = ADD_EQUALS;
  return n;
}

int data_add_answer(long a, long b, int *tokens) {
  int n = put_number(a + b, tokens);
  tokens[n++] = ADD_NEWLINE;
  return n;
}

void data_add_sequence(const data_t *d, int split, long index, int seq, int *tokens) {
  int buf[64], filled = 0;
  for (long k = 0; filled < seq + 1; k++) {
    long a, b;
    data_add_problem(d, split, index * 4096 + k, &a, &b);
    int n = data_add_prompt(a, b, buf);
    n += data_add_answer(a, b, buf + n) - 1;  // the next prompt's newline ends this one
    for (int i = 0; i < n && filled < seq + 1; i++) tokens[filled++] = buf[i];
  }
}
