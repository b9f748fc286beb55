/*
 * delay_hub.c — a network link with latency, for kernels without tc netem.
 *
 *   delay_hub -d DELAY_US [-l LOSS_PCT] [-i IFNAME] NETNS...
 *
 * Creates a TAP device IFNAME (default wv0) in each named network namespace
 * (/run/netns/NAME) and joins them like an Ethernet hub whose ports each
 * hold every frame DELAY_US microseconds (one way) before passing it on,
 * dropping LOSS_PCT percent of frames at random. One thread: frames wait in
 * arrival order (the delay is the same for all, so that is also the order
 * they are due), a timerfd wakes the hub when the oldest is due, and
 * nothing spins. Prints "ready" once every device exists; runs until
 * SIGTERM or SIGINT, and the devices vanish with it.
 *
 * It moves frames with two copies each, so it suits latency tests, not
 * bandwidth ones. netns.sh --wire-delay starts it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_PORTS 64
#define QUEUE_FRAMES 8192
#define FRAME_MAX 2048

typedef struct {
  int64_t due_ns;
  int from;
  uint16_t len;
  unsigned char data[FRAME_MAX];
} frame_t;

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig, stop = 1; }

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// A TAP device named ifname inside namespace ns; returns its descriptor.
static int tap_in_namespace(const char *ns, const char *ifname, int home_ns) {
  char path[256];
  snprintf(path, sizeof(path), "/run/netns/%s", ns);
  int nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) {
    fprintf(stderr, "delay_hub: cannot enter namespace %s: %s\n", ns, strerror(errno));
    if (nsfd >= 0) close(nsfd);
    return -1;
  }
  close(nsfd);
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
  if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) != 0) {
    fprintf(stderr, "delay_hub: cannot create TAP %s in %s: %s\n", ifname, ns, strerror(errno));
    if (fd >= 0) close(fd);
    fd = -1;
  }
  if (setns(home_ns, CLONE_NEWNET) != 0) {
    fprintf(stderr, "delay_hub: cannot return to the starting namespace: %s\n", strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

static void arm(int tfd, int64_t due_ns) {
  struct itimerspec its = {.it_value = {due_ns / 1000000000, due_ns % 1000000000}};
  timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

int main(int argc, char **argv) {
  long delay_us = -1;
  double loss = 0;
  const char *ifname = "wv0";
  int opt;
  while ((opt = getopt(argc, argv, "d:l:i:")) != -1) {
    if (opt == 'd') delay_us = strtol(optarg, NULL, 10);
    else if (opt == 'l') loss = strtod(optarg, NULL);
    else if (opt == 'i') ifname = optarg;
    else break;
  }
  int nports = argc - optind;
  if (delay_us < 0 || loss < 0 || loss > 100 || nports < 2 || nports > MAX_PORTS) {
    fprintf(stderr, "usage: delay_hub -d DELAY_US [-l LOSS_PCT] [-i IFNAME] NETNS NETNS...\n");
    return 2;
  }
  int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int ep = epoll_create1(EPOLL_CLOEXEC), tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  frame_t *queue = calloc(QUEUE_FRAMES, sizeof(*queue));
  int fds[MAX_PORTS];
  if (home < 0 || ep < 0 || tfd < 0 || queue == NULL) {
    fprintf(stderr, "delay_hub: set-up failed: %s\n", strerror(errno));
    return 1;
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = MAX_PORTS};
  epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
  for (int i = 0; i < nports; i++) {
    if ((fds[i] = tap_in_namespace(argv[optind + i], ifname, home)) < 0) return 1;
    ev.data.u32 = (uint32_t)i;
    epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
  }
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // a netns.sh killed outright takes the hub with it
  srand48((long)now_ns());
  printf("ready\n");
  fflush(stdout);

  uint64_t head = 0, tail = 0, dropped_full = 0;
  while (!stop) {
    struct epoll_event evs[MAX_PORTS + 1];
    int n = epoll_wait(ep, evs, MAX_PORTS + 1, -1);
    if (n < 0 && errno != EINTR) break;
    for (int e = 0; e < n; e++) {
      if (evs[e].data.u32 == MAX_PORTS) {
        uint64_t ticks;
        while (read(tfd, &ticks, sizeof(ticks)) > 0) {
        }
        continue;
      }
      int p = (int)evs[e].data.u32;
      for (;;) {  // drain the port
        unsigned char buf[FRAME_MAX];
        ssize_t len = read(fds[p], buf, sizeof(buf));
        if (len <= 0) break;
        if (loss > 0 && drand48() * 100 < loss) continue;
        if (tail - head == QUEUE_FRAMES) {
          dropped_full++;
          continue;
        }
        frame_t *f = &queue[tail++ % QUEUE_FRAMES];
        f->due_ns = now_ns() + delay_us * 1000;
        f->from = p;
        f->len = (uint16_t)len;
        memcpy(f->data, buf, (size_t)len);
        if (tail - head == 1) arm(tfd, f->due_ns);
      }
    }
    int64_t now = now_ns();
    while (head < tail && queue[head % QUEUE_FRAMES].due_ns <= now) {
      const frame_t *f = &queue[head++ % QUEUE_FRAMES];
      for (int q = 0; q < nports; q++)
        if (q != f->from) {
          ssize_t w = write(fds[q], f->data, f->len);  // a full device queue drops it, as a link would
          (void)w;
        }
    }
    if (head < tail) arm(tfd, queue[head % QUEUE_FRAMES].due_ns);
  }
  if (dropped_full) fprintf(stderr, "delay_hub: %llu frames dropped on a full queue\n", (unsigned long long)dropped_full);
  free(queue);
  return 0;
}
