/*
 * tune_file.h — link constants for the cost model: defaults, replaced by
 * what weft-calibrate measured when WEFT_TUNE_FILE names its output.
 */
#ifndef WEFT_TUNE_FILE_H
#define WEFT_TUNE_FILE_H

typedef struct {
  double alpha;      // seconds per message (one way)
  double bandwidth;  // bytes per second
  int measured;      // 1: from the tuning file
} weft_link_t;

typedef struct {
  weft_link_t intra;  // between ranks of one host (shared memory)
  weft_link_t inter;  // between hosts (the network)
} weft_links_t;

// Defaults: shared memory as measured on a 2-core reference VM (0.4 us,
// 6 GB/s per direction); the network as a 10 Gb/s TCP link (25 us, 1.2 GB/s).
#define WEFT_LINKS_DEFAULT \
  { {0.4e-6, 6e9, 0}, {25e-6, 1.2e9, 0} }

// The constants in force (read once per process).
const weft_links_t *weft_links(void);

#endif
