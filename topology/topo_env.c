/*
 * topo_env.c — the topology the environment asks for: NCCL_TOPO_FILE (NCCL
 * XML), else WEFT_HWLOC_XML or hwloc's own HWLOC_XMLFILE (hwloc XML), else
 * detection of this machine; written to NCCL_TOPO_DUMP_FILE when set.
 */
#include "env.h"
#include "topo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

weft_topo_t *weft_topo_load_env(char *err, size_t errlen) {
  const char *file = weft_env_NCCL_TOPO_FILE();
  const char *hwloc_xml = weft_env_WEFT_HWLOC_XML();
  return file && *file ? weft_topo_load_xml(file, err, errlen)
                       : weft_topo_load_hwloc(hwloc_xml && *hwloc_xml ? hwloc_xml : NULL, err, errlen);
}

weft_topo_t *weft_topo_from_env(char *err, size_t errlen) {
  weft_topo_t *t = weft_topo_load_env(err, errlen);
  const char *dump = weft_env_NCCL_TOPO_DUMP_FILE();
  if (t && dump && *dump && weft_topo_dump_xml(t, dump, err, errlen)) {
    weft_topo_free(t);
    return NULL;
  }
  return t;
}

int weft_topo_dump_xml_atomic(const weft_topo_t *t, const char *path, char *err, size_t errlen) {
  char tmp[4200];
  if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
    snprintf(err, errlen, "%.200s...: path too long", path);
    return -1;
  }
  if (weft_topo_dump_xml(t, tmp, err, errlen)) {
    unlink(tmp);
    return -1;
  }
  if (rename(tmp, path) != 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}
