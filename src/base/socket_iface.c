/*
 * socket_iface.c — choose the local interface address for bootstrap sockets
 * (weft_socket_find_interface in socket.h).
 *
 * NCCL_SOCKET_IFNAME is a comma list of interface-name prefixes ("eth,ib");
 * a leading '^' turns it into an exclusion list ("^docker,lo") and a leading
 * '=' (after any '^') makes the names exact ("=eth0", "^=eth1"). Without it,
 * interfaces named ib* are preferred, then any other that is up and not
 * loopback/docker/virbr/veth, then loopback. NCCL_SOCKET_FAMILY restricts
 * the family; without it IPv4 is preferred over IPv6 on the same footing.
 * IPv6 link-local addresses are never chosen (they need a scope to be used).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"
#include "env.h"
#include "socket.h"

#define WEFT_IFACE_MAX_NAMES 32

typedef struct {
  int active;   // NCCL_SOCKET_IFNAME was set
  int exclude;  // '^': the names are excluded
  int exact;    // '=': whole names, not prefixes
  int count;
  char *names[WEFT_IFACE_MAX_NAMES];
  char *storage;
} weft_iface_filter_t;

static int parse_family(int *family) {
  const char *text = weft_env_NCCL_SOCKET_FAMILY();
  if (text == NULL) {
    *family = AF_UNSPEC;
  } else if (strcmp(text, "AF_INET") == 0) {
    *family = AF_INET;
  } else if (strcmp(text, "AF_INET6") == 0) {
    *family = AF_INET6;
  } else {
    WARN("NCCL_SOCKET_FAMILY='%s' is not AF_INET or AF_INET6", text);
    return -1;
  }
  return 0;
}

static const char *family_name(int family) {
  return family == AF_INET ? "AF_INET" : family == AF_INET6 ? "AF_INET6" : "any";
}

static int parse_filter(const char *spec, weft_iface_filter_t *f) {
  memset(f, 0, sizeof(*f));
  if (spec == NULL) return 0;
  f->active = 1;
  if (*spec == '^') f->exclude = 1, spec++;
  if (*spec == '=') f->exact = 1, spec++;
  f->storage = strdup(spec);
  if (f->storage == NULL) {
    WARN("out of memory parsing NCCL_SOCKET_IFNAME");
    return -1;
  }
  char *save = NULL;
  for (char *tok = strtok_r(f->storage, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    if (*tok == '\0') continue;
    if (f->count == WEFT_IFACE_MAX_NAMES) {
      WARN("NCCL_SOCKET_IFNAME lists more than %d names", WEFT_IFACE_MAX_NAMES);
      free(f->storage);
      f->storage = NULL;
      return -1;
    }
    f->names[f->count++] = tok;
  }
  return 0;
}

static int filter_match(const weft_iface_filter_t *f, const char *ifname) {
  int hit = 0;
  for (int i = 0; i < f->count && !hit; i++)
    hit = f->exact ? strcmp(ifname, f->names[i]) == 0
                   : strncmp(ifname, f->names[i], strlen(f->names[i])) == 0;
  return f->exclude ? !hit : hit;
}

static int has_prefix(const char *name, const char *prefix) {
  return strncmp(name, prefix, strlen(prefix)) == 0;
}

// Preference of one address: lower is better, -1 = not usable.
static int rank_address(const struct ifaddrs *ifa, int family, const weft_iface_filter_t *f) {
  if (ifa->ifa_addr == NULL || ifa->ifa_name == NULL) return -1;
  int fam = ifa->ifa_addr->sa_family;
  if (fam != AF_INET && fam != AF_INET6) return -1;
  if (family != AF_UNSPEC && fam != family) return -1;
  if (!(ifa->ifa_flags & IFF_UP)) return -1;
  if (fam == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)ifa->ifa_addr;
    if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) return -1;
  }
  int loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
  int group;
  if (f->active) {
    if (!filter_match(f, ifa->ifa_name)) return -1;
    group = loopback;  // a real interface beats loopback if both match
  } else {
    if (has_prefix(ifa->ifa_name, "docker") || has_prefix(ifa->ifa_name, "virbr") ||
        has_prefix(ifa->ifa_name, "veth"))
      return -1;
    group = loopback ? 2 : has_prefix(ifa->ifa_name, "ib") ? 0 : 1;
  }
  return group * 2 + (fam == AF_INET6);
}

// "lo, eth0" — the up interfaces that carry an IPv4/IPv6 address, for errors.
static void list_interfaces(const struct ifaddrs *all, char *out, size_t len) {
  out[0] = '\0';
  size_t used = 0;
  for (const struct ifaddrs *a = all; a != NULL; a = a->ifa_next) {
    if (a->ifa_addr == NULL || a->ifa_name == NULL || !(a->ifa_flags & IFF_UP)) continue;
    if (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6) continue;
    int seen = 0;
    for (const struct ifaddrs *b = all; b != a && !seen; b = b->ifa_next)
      seen = b->ifa_addr != NULL && b->ifa_name != NULL && (b->ifa_flags & IFF_UP) &&
             (b->ifa_addr->sa_family == AF_INET || b->ifa_addr->sa_family == AF_INET6) &&
             strcmp(a->ifa_name, b->ifa_name) == 0;
    if (seen) continue;
    int n = snprintf(out + used, len - used, "%s%s", used ? ", " : "", a->ifa_name);
    if (n < 0 || (size_t)n >= len - used) break;
    used += (size_t)n;
  }
  if (out[0] == '\0') snprintf(out, len, "none");
}

ncclResult_t weft_socket_find_interface(weft_sockaddr_t *addr, char *ifname, size_t ifname_len) {
  if (addr == NULL) {
    WARN("weft_socket_find_interface: NULL output address");
    return ncclInvalidArgument;
  }
  int family;
  if (parse_family(&family) != 0) return ncclInvalidArgument;
  const char *spec = weft_env_NCCL_SOCKET_IFNAME();
  weft_iface_filter_t filter;
  if (parse_filter(spec, &filter) != 0) return ncclInvalidArgument;

  struct ifaddrs *all = NULL;
  if (getifaddrs(&all) != 0) {
    WARN("getifaddrs failed: %s", strerror(errno));
    free(filter.storage);
    return ncclSystemError;
  }
  const struct ifaddrs *best = NULL;
  int best_rank = -1;
  for (const struct ifaddrs *ifa = all; ifa != NULL; ifa = ifa->ifa_next) {
    int r = rank_address(ifa, family, &filter);
    if (r >= 0 && (best == NULL || r < best_rank)) best = ifa, best_rank = r;
  }
  free(filter.storage);

  if (best == NULL) {
    char avail[512];
    list_interfaces(all, avail, sizeof(avail));
    freeifaddrs(all);
    if (spec != NULL)
      WARN("no usable interface matches NCCL_SOCKET_IFNAME='%s' (family %s); interfaces that are up: %s",
           spec, family_name(family), avail);
    else
      WARN("no usable network interface (family %s); interfaces that are up: %s",
           family_name(family), avail);
    return ncclSystemError;
  }

  memset(addr, 0, sizeof(*addr));
  if (best->ifa_addr->sa_family == AF_INET) {
    memcpy(&addr->sin, best->ifa_addr, sizeof(addr->sin));
    addr->sin.sin_port = 0;
  } else {
    memcpy(&addr->sin6, best->ifa_addr, sizeof(addr->sin6));
    addr->sin6.sin6_port = 0;
  }
  if (ifname != NULL && ifname_len > 0) snprintf(ifname, ifname_len, "%s", best->ifa_name);
  char text[WEFT_ADDR_STRLEN];
  INFO(WEFT_LOG_INIT | WEFT_LOG_NET, "socket interface %s: %s", best->ifa_name,
       weft_socket_addr_str(addr, text, sizeof(text)));
  freeifaddrs(all);
  return ncclSuccess;
}
