/*
 * hooks.c — the plugin hook table (hooks.h) and the per-communicator set-up
 * of the tuner and profiler plugins.
 */
#include "hooks.h"

#include "profiler_plugin.h"
#include "tuner_plugin.h"

weft_plugin_hooks_t weft_plugin_hooks;

void weft_plugins_comm_init(const weft_plugin_comm_t *c, void **tuner, void **prof) {
  *tuner = weft_tuner_plugin_comm_init(c);
  *prof = weft_profiler_comm_init(c);
}

void weft_plugins_comm_free(void *tuner, void *prof) {
  weft_profiler_comm_free(prof);
  weft_tuner_plugin_comm_free(tuner);
}
