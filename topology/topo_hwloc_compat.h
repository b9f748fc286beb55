/*
 * topo_hwloc_compat.h — hwloc 3 XML translated for the hwloc 2 library.
 */
#ifndef WEFT_TOPO_HWLOC_COMPAT_H
#define WEFT_TOPO_HWLOC_COMPAT_H

#include <stddef.h>

// The file at path rewritten as hwloc 2 XML, or NULL when it is not an hwloc
// 3 file (or cannot be read). Caller frees.
char *weft_hwloc_xml_v2(const char *path, size_t *len);

#endif
