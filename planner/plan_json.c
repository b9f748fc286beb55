/*
 * plan_json.c — a small JSON reader: enough to take bandwidths out of the
 * perf tools' -J reports and, in the tests, to read weft-plan --json back.
 *
 * Recursive descent into a tree of plan_json_t. Nesting is capped, every
 * error names the byte offset, and nothing here trusts the input: a
 * truncated or hostile file is an error, never a crash.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

#define MAX_DEPTH 64

typedef struct {
  const char *s, *p;
  char *err;
  size_t errlen;
  int failed;
} parser_t;

static void fail(parser_t *ps, const char *what) {
  if (!ps->failed) snprintf(ps->err, ps->errlen, "%s at byte %ld", what, (long)(ps->p - ps->s));
  ps->failed = 1;
}

static void skip_space(parser_t *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r') ps->p++;
}

static plan_json_t *node(parser_t *ps, plan_json_kind_t kind) {
  plan_json_t *v = calloc(1, sizeof(*v));
  if (v == NULL) fail(ps, "out of memory");
  else v->kind = kind;
  return v;
}

// Appends the UTF-8 form of code point cp to out (which has room for 4).
static size_t put_utf8(char *out, unsigned cp) {
  if (cp < 0x80) return out[0] = (char)cp, 1;
  if (cp < 0x800) return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), 2;
  out[0] = (char)(0xE0 | cp >> 12);
  out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[2] = (char)(0x80 | (cp & 0x3F));
  return 3;
}

static char *parse_string(parser_t *ps) {
  ps->p++;  // the opening quote
  size_t cap = 16, len = 0;
  char *out = malloc(cap);
  while (out != NULL && !ps->failed) {
    unsigned char ch = (unsigned char)*ps->p;
    if (ch == '"') {
      ps->p++;
      out[len] = '\0';
      return out;
    }
    if (ch == '\0' || ch < 0x20) {
      fail(ps, ch ? "control character in a string" : "unterminated string");
      break;
    }
    if (len + 5 > cap) {
      char *bigger = realloc(out, cap *= 2);
      if (bigger == NULL) break;
      out = bigger;
    }
    ps->p++;
    if (ch != '\\') {
      out[len++] = (char)ch;
      continue;
    }
    char esc = *ps->p++;
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *hit = esc ? strchr(from, esc) : NULL;
    if (hit) {
      out[len++] = to[hit - from];
    } else if (esc == 'u') {
      unsigned cp = 0;
      for (int i = 0; i < 4; i++) {
        char h = *ps->p++;
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) {
          fail(ps, "bad \\u escape");
          break;
        }
        cp = cp * 16 + (unsigned)d;
      }
      len += put_utf8(out + len, cp);
    } else {
      fail(ps, "bad escape in a string");
    }
  }
  if (out == NULL) fail(ps, "out of memory");
  free(out);
  return NULL;
}

static plan_json_t *parse_value(parser_t *ps, int depth);

// Object or array: members separated by commas until the closing bracket.
static plan_json_t *parse_container(parser_t *ps, int depth, int object) {
  plan_json_t *v = node(ps, object ? PLAN_JSON_OBJECT : PLAN_JSON_ARRAY), **tail;
  if (v == NULL) return NULL;
  tail = &v->child;
  ps->p++;
  skip_space(ps);
  char close = object ? '}' : ']';
  if (*ps->p == close) {
    ps->p++;
    return v;
  }
  while (!ps->failed) {
    char *key = NULL;
    skip_space(ps);
    if (object) {
      if (*ps->p != '"') {
        fail(ps, "expected a member name");
        break;
      }
      if ((key = parse_string(ps)) == NULL) break;
      skip_space(ps);
      if (*ps->p != ':') {
        free(key);
        fail(ps, "expected ':'");
        break;
      }
      ps->p++;
    }
    plan_json_t *item = parse_value(ps, depth + 1);
    if (item == NULL) {
      free(key);
      break;
    }
    item->key = key;
    *tail = item;
    tail = &item->next;
    skip_space(ps);
    if (*ps->p == ',') {
      ps->p++;
    } else if (*ps->p == close) {
      ps->p++;
      return v;
    } else {
      fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
  }
  plan_json_free(v);
  return NULL;
}

static plan_json_t *parse_number(parser_t *ps) {
  const char *start = ps->p;
  if (*ps->p == '-') ps->p++;
  if (*ps->p < '0' || *ps->p > '9') {
    fail(ps, "unexpected character");
    return NULL;
  }
  char *end = NULL;
  double d = strtod(start, &end);
  if (end == start || !isfinite(d)) {
    fail(ps, "bad number");
    return NULL;
  }
  ps->p = end;
  plan_json_t *v = node(ps, PLAN_JSON_NUMBER);
  if (v) v->number = d;
  return v;
}

static plan_json_t *parse_value(parser_t *ps, int depth) {
  if (depth > MAX_DEPTH) {
    fail(ps, "nested too deeply");
    return NULL;
  }
  skip_space(ps);
  const struct {
    const char *word;
    plan_json_kind_t kind;
    double number;
  } words[] = {{"true", PLAN_JSON_BOOL, 1}, {"false", PLAN_JSON_BOOL, 0}, {"null", PLAN_JSON_NULL, 0}};
  switch (*ps->p) {
    case '{': return parse_container(ps, depth, 1);
    case '[': return parse_container(ps, depth, 0);
    case '"': {
      char *s = parse_string(ps);
      plan_json_t *v = s ? node(ps, PLAN_JSON_STRING) : NULL;
      if (v) v->string = s;
      else free(s);
      return v;
    }
    default: break;
  }
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
    size_t n = strlen(words[i].word);
    if (strncmp(ps->p, words[i].word, n) != 0) continue;
    ps->p += n;
    plan_json_t *v = node(ps, words[i].kind);
    if (v) v->number = words[i].number;
    return v;
  }
  if (*ps->p == '\0') {
    fail(ps, "unexpected end of input");
    return NULL;
  }
  return parse_number(ps);
}

plan_json_t *plan_json_parse(const char *text, char *err, size_t errlen) {
  parser_t ps = {.s = text, .p = text, .err = err, .errlen = errlen};
  plan_json_t *v = parse_value(&ps, 0);
  if (v != NULL) {
    skip_space(&ps);
    if (*ps.p != '\0') fail(&ps, "trailing characters");
  }
  if (ps.failed) {
    plan_json_free(v);
    return NULL;
  }
  return v;
}

void plan_json_free(plan_json_t *v) {
  while (v != NULL) {
    plan_json_t *next = v->next;
    plan_json_free(v->child);
    free(v->string);
    free(v->key);
    free(v);
    v = next;
  }
}

const plan_json_t *plan_json_get(const plan_json_t *obj, const char *key) {
  if (obj == NULL || obj->kind != PLAN_JSON_OBJECT) return NULL;
  for (const plan_json_t *m = obj->child; m != NULL; m = m->next)
    if (m->key != NULL && strcmp(m->key, key) == 0) return m;
  return NULL;
}

double plan_json_number(const plan_json_t *obj, const char *key, double fallback) {
  const plan_json_t *v = plan_json_get(obj, key);
  return v != NULL && v->kind == PLAN_JSON_NUMBER ? v->number : fallback;
}
