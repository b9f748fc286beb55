# perf.mk — the nccl-tests-style benchmarks (perf/): one small file per
# collective and the shared driver, on the public API.
PERF_SRCS   := $(wildcard perf/*_perf.c)
PERF_BINS   := $(PERF_SRCS:perf/%.c=$(BUILD)/bin/%)
PERF_COMMON := perf/common.c perf/common_args.c perf/common_check.c perf/common_device.c perf/common_out.c
ALL += $(PERF_BINS)

$(BUILD)/bin/%_perf: perf/%_perf.c $(PERF_COMMON) perf/common.h perf/common_internal.h $(TOOLS_COMMON) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iperf -Itools/common -o $@ $< $(PERF_COMMON) $(TOOLS_COMMON) -L$(BUILD)/lib -lweft $(RPATH) $(LDLIBS)

# The reduction loops' micro-benchmark (perf/arith/) calls src/arith directly,
# so it links the library's objects, as the unit tests do.
ALL += $(BUILD)/bin/reduce_bench
$(BUILD)/bin/reduce_bench: perf/arith/reduce_bench.c $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -o $@ $^ $(LDLIBS)
