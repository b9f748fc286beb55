/*
 * weft_env.c — `weft-env`: show weft's environment knobs.
 *
 *   weft-env              every knob and the value weft would use now
 *   weft-env --markdown   the knob table as markdown (this is docs/env.md)
 *
 * Built against the library's internal env module (src/base/env.c, src/base/debug.c)
 * so it reads the knobs exactly as the library does.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "env.h"

static void print_values(void) {
#define WEFT_ENV_INT(name, def, doc) printf("%-26s %" PRId64 "\n", #name, weft_env_##name());
#define WEFT_ENV_STR(name, def, doc)                                              \
  do {                                                                            \
    const char *v = weft_env_##name();                                            \
    if (v != NULL && strstr(#name, "SECRET") != NULL) v = "(hidden)";             \
    printf("%-26s %s\n", #name, v != NULL ? v : "(unset)");                       \
  } while (0);
#include "env_table.h"
#undef WEFT_ENV_INT
#undef WEFT_ENV_STR
}

int main(int argc, char **argv) {
  if (argc == 1) {
    print_values();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--markdown") == 0) {
    weft_env_print_markdown();
    return 0;
  }
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: %s [--markdown]\n", argv[0]);
    return 0;
  }
  fprintf(stderr, "usage: %s [--markdown]\n", argv[0]);
  return 2;
}
