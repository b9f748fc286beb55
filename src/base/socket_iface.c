/*
 * socket_iface.c — which local interfaces sockets use: the one address for
 * bootstrap sockets (weft_socket_find_interface) and the list of devices
 * the socket transport offers (weft_socket_list_interfaces), both in
 * socket.h.
 *
 * NCCL_SOCKET_IFNAME is a comma list of interface-name prefixes ("eth,ib");
 * a leading '^' turns it into an exclusion list ("^docker,lo") and a leading
 * '=' (after any '^') makes the names exact ("=eth0", "^=eth1"); anything
 * after a ':' in an entry is a port, which interfaces do not have.
 *
 * Bootstrap: without NCCL_SOCKET_IFNAME, interfaces named ib* are
 * preferred, then any other that is up and not loopback/docker/virbr/veth,
 * then loopback. NCCL_SOCKET_FAMILY restricts the family; without it IPv4
 * is preferred over IPv6 on the same footing.
 *
 * The transport's devices follow NCCL's own list: running interfaces in
 * the order getifaddrs gives them, one address per name, at most
 * WEFT_SOCKET_MAX_IFS; unset NCCL_SOCKET_IFNAME tries ib*, then the
 * interface on NCCL_COMM_ID's subnet, then everything but docker, lo and
 * virbr, then docker, lo, virbr, and the first rule that finds any wins.
 *
 * IPv6 link-local addresses are never chosen (they need a scope to be
 * used, and a peer's scope means nothing here).
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
    char *port = strchr(tok, ':');
    if (port != NULL) *port = '\0';  // "name:port": interfaces have no port
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
  int hit = f->count == 0;  // an empty list names every interface
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

/* ---- the socket transport's devices ---- */

static int is_ipv6_unusable(const struct sockaddr *sa) {
  const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
  return sa->sa_family == AF_INET6 && (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) || IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr));
}

static void take_address(weft_socket_iface_t *out, const struct ifaddrs *ifa) {
  memset(out, 0, sizeof(*out));
  snprintf(out->name, sizeof(out->name), "%s", ifa->ifa_name);
  if (ifa->ifa_addr->sa_family == AF_INET) memcpy(&out->addr.sin, ifa->ifa_addr, sizeof(out->addr.sin));
  else memcpy(&out->addr.sin6, ifa->ifa_addr, sizeof(out->addr.sin6));
  if (out->addr.sa.sa_family == AF_INET) out->addr.sin.sin_port = 0;
  else out->addr.sin6.sin6_port = 0;
}

// The running interfaces `spec` selects (NCCL_SOCKET_IFNAME's syntax), in
// getifaddrs order, each once, appended after the n already in ifs.
static int list_matching(const struct ifaddrs *all, const char *spec, int family, weft_socket_iface_t *ifs, int max,
                         int n) {
  weft_iface_filter_t f;
  if (parse_filter(spec, &f) != 0) return -1;
  for (const struct ifaddrs *ifa = all; ifa != NULL && n < max; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == NULL || ifa->ifa_name == NULL) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (!(ifa->ifa_flags & IFF_RUNNING)) continue;
    if (family != AF_UNSPEC && fam != family) continue;
    if (is_ipv6_unusable(ifa->ifa_addr) || !filter_match(&f, ifa->ifa_name)) continue;
    int seen = 0;
    for (int i = 0; i < n && !seen; i++) seen = strcmp(ifs[i].name, ifa->ifa_name) == 0;
    if (!seen) take_address(&ifs[n++], ifa);
  }
  free(f.storage);
  return n;
}

static int same_subnet(const struct ifaddrs *ifa, const weft_sockaddr_t *remote) {
  if (ifa->ifa_addr == NULL || ifa->ifa_netmask == NULL || ifa->ifa_addr->sa_family != remote->sa.sa_family) return 0;
  if (remote->sa.sa_family == AF_INET) {
    const struct sockaddr_in *a = (const void *)ifa->ifa_addr, *m = (const void *)ifa->ifa_netmask;
    return ((a->sin_addr.s_addr ^ remote->sin.sin_addr.s_addr) & m->sin_addr.s_addr) == 0;
  }
  if (remote->sa.sa_family != AF_INET6) return 0;
  const struct sockaddr_in6 *a = (const void *)ifa->ifa_addr, *m = (const void *)ifa->ifa_netmask;
  for (int i = 0; i < 16; i++)
    if ((a->sin6_addr.s6_addr[i] ^ remote->sin6.sin6_addr.s6_addr[i]) & m->sin6_addr.s6_addr[i]) return 0;
  return a->sin6_scope_id == remote->sin6.sin6_scope_id;
}

// The first interface whose subnet holds NCCL_COMM_ID's address (0 or 1 found).
static int list_comm_id_subnet(const struct ifaddrs *all, const char *comm_id, weft_socket_iface_t *ifs,
                               ncclResult_t *res) {
  weft_sockaddr_t remote;
  if ((*res = weft_socket_parse_addr(comm_id, &remote)) != ncclSuccess) return 0;
  for (const struct ifaddrs *ifa = all; ifa != NULL; ifa = ifa->ifa_next) {
    if (ifa->ifa_name == NULL || !same_subnet(ifa, &remote) || is_ipv6_unusable(ifa->ifa_addr)) continue;
    take_address(&ifs[0], ifa);
    return 1;
  }
  return 0;
}

ncclResult_t weft_socket_list_interfaces(weft_socket_iface_t *ifs, int max, int *n) {
  if (ifs == NULL || n == NULL || max < 1) {
    WARN("weft_socket_list_interfaces: %s", ifs == NULL ? "NULL list" : n == NULL ? "NULL count" : "no room");
    return ncclInvalidArgument;
  }
  *n = 0;
  int family;
  if (parse_family(&family) != 0) return ncclInvalidArgument;
  const char *spec = weft_env_NCCL_SOCKET_IFNAME();
  if (spec != NULL && strlen(spec) <= 1) spec = NULL;  // as NCCL: one character selects nothing
  struct ifaddrs *all = NULL;
  if (getifaddrs(&all) != 0) {
    WARN("getifaddrs failed: %s", strerror(errno));
    return ncclSystemError;
  }
  ncclResult_t res = ncclSuccess;
  int found = 0;
  if (spec != NULL) {
    found = list_matching(all, spec, family, ifs, max, 0);
  } else {
    static const char *const rules[] = {"ib", NULL /* NCCL_COMM_ID's subnet */, "^docker,lo,virbr", "docker", "lo",
                                        "virbr"};
    const char *comm_id = weft_env_NCCL_COMM_ID();
    for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]) && found == 0 && res == ncclSuccess; r++) {
      if (rules[r] != NULL) found = list_matching(all, rules[r], family, ifs, max, 0);
      else if (comm_id != NULL && strlen(comm_id) > 1) found = list_comm_id_subnet(all, comm_id, ifs, &res);
    }
  }
  if (found < 0) res = ncclInvalidArgument;
  if (found == 0 && res == ncclSuccess) {
    char avail[512];
    list_interfaces(all, avail, sizeof(avail));
    if (spec != NULL)
      WARN("NET/Socket : no running interface matches NCCL_SOCKET_IFNAME='%s' (family %s); interfaces that are up: %s",
           spec, family_name(family), avail);
    else
      WARN("NET/Socket : no running network interface (family %s); interfaces that are up: %s", family_name(family),
           avail);
    res = ncclSystemError;
  }
  freeifaddrs(all);
  if (res == ncclSuccess) *n = found;
  return res;
}
