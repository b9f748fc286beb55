/*
 * data.h — where the trainer's tokens come from: the generated addition
 * task (default), a text file read as bytes, or an llm.c token file.
 *
 * Every source is deterministic in (seed, split, index): sequence `index`
 * of a split is the same whatever the parallel layout, so a data-parallel
 * rank asks for the indices of its part of the global batch and every
 * layout sees exactly the tokens one rank would.
 */
#ifndef WEFT_TRAINER_DATA_H
#define WEFT_TRAINER_DATA_H

#include <stddef.h>
#include <stdint.h>

enum { DATA_TRAIN = 0, DATA_VAL = 1 };

typedef struct data data_t;

// Opens a source: path NULL or "" -> the addition task with `digits`-digit
// operands; a file starting with llm.c's magic -> its GPT-2 tokens; any
// other file -> its bytes. On failure returns NULL and writes why into err.
data_t *data_open(const char *path, int digits, unsigned long long seed, char *err, size_t errlen);
void data_close(data_t *d);

int data_vocab(const data_t *d);
const char *data_describe(const data_t *d);  // one line for the banner
// Tokens in a split of a file source (-1: generated, unlimited).
long data_split_tokens(const data_t *d, int split);
// seq + 1 tokens of sequence `index` of a split (inputs are [0, seq),
// targets [1, seq]).
void data_sequence(const data_t *d, int split, long index, int seq, int *tokens);

// ---- The addition task: "a+b=c\n" with a, b below 10^digits.
// Tokens: '0'..'9' -> 0..9, '+' 10, '=' 11, '\n' 12.
enum { ADD_PLUS = 10, ADD_EQUALS = 11, ADD_NEWLINE = 12, ADD_VOCAB = 13 };
int data_is_addition(const data_t *d);
// Problem `index` of a split: its operands. A pair belongs to the held-out
// split when a hash of it is 0 mod 10, so no validation problem is trained on.
void data_add_problem(const data_t *d, int split, long index, long *a, long *b);
// Writes the tokens of "a+b=" (with a leading newline) and returns the count.
int data_add_prompt(long a, long b, int *tokens);
// Digits of a + b followed by the newline token; returns the count.
int data_add_answer(long a, long b, int *tokens);

// ---- llm.c token files: 256 int32 header (magic, version, count), uint16 tokens.
enum { LLMC_MAGIC = 20240520, LLMC_VERSION = 1, LLMC_HEADER_INTS = 256, GPT2_VOCAB = 50257 };

#endif  // WEFT_TRAINER_DATA_H
