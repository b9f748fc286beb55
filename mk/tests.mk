# tests.mk — the test binaries tests/run.sh runs (tests/README.md), the
# stand-ins they load (tests/fakes/) and the include check.
UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
MULTI_SRCS := $(wildcard tests/multirank/test_*.c)
MULTI_BINS := $(MULTI_SRCS:tests/multirank/%.c=$(BUILD)/tests/multirank/%)
PROG_SRCS  := $(wildcard tests/multirank/progs/*.c)
TEST_PROGS := $(PROG_SRCS:tests/multirank/progs/%.c=$(BUILD)/tests/progs/%)
DELAY_HUB  := $(BUILD)/tests/multihost/delay_hub
TEST_DEPS  += $(UNIT_BINS) $(MULTI_BINS) $(TEST_PROGS) $(DELAY_HUB)

# Unit tests link the objects directly (internal symbols are hidden in the .so).
$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -o $@ $^ -lcriterion $(LDLIBS)
$(BUILD)/tests/unit/test_net_plugin $(BUILD)/tests/multirank/test_net_plugin: | $(NET_EXAMPLE) $(NET_EXAMPLE_OLD)
# The transport contract and the engine over a stand-in transport link the
# stand-ins of tests/fakes/transport/ too.
FAKE_TP_TESTS := $(BUILD)/tests/unit/test_transport_contract $(BUILD)/tests/unit/test_engine_fake
$(FAKE_TP_TESTS): $(BUILD)/tests/unit/%: tests/unit/%.c $(wildcard tests/fakes/transport/*.c) $(LIB_OBJS) \
  $(wildcard tests/fakes/transport/*.h) tests/multirank/harness.h
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -o $@ $(filter %.c %.o,$^) -lcriterion $(LDLIBS)
# The programs' shared helpers (tools/common/) are not part of the library.
$(BUILD)/tests/unit/test_prog_util: tests/unit/test_prog_util.c $(TOOLS_COMMON)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Itools/common -o $@ $^ -lcriterion

# Multi-rank tests and the programs they start use the public API.
$(BUILD)/tests/multirank/%: tests/multirank/%.c tests/multirank/harness.h tests/multirank/rank_logs.h $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Itests/multirank -o $@ $< -L$(BUILD)/lib -lweft -Wl,-rpath,$(abspath $(BUILD)/lib) -lcriterion $(LDLIBS)
$(BUILD)/tests/multirank/test_plugins_tp: $(TP_PLUGIN_EXAMPLES) $(TP_PLUGIN_V4) $(PROFILER_PLUGIN_OLD)
$(BUILD)/tests/multirank/test_env_plugin: $(ENV_EXAMPLE) $(ENV_V1ONLY) $(BUILD)/tests/progs/env_probe
$(BUILD)/tests/multirank/test_cuda_mem $(BUILD)/tests/multirank/test_cuda_stream \
  $(BUILD)/tests/multirank/test_topo_order: tests/multirank/cuda_driver.h
$(BUILD)/tests/multirank/test_cuda_stream: tests/multirank/cuda_sweep.h

$(BUILD)/tests/progs/%: tests/multirank/progs/%.c $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< -L$(BUILD)/lib -lweft -Wl,-rpath,$(abspath $(BUILD)/lib) $(LDLIBS)

# The verbs backend's data-path test dlopens a stand-in libibverbs.
FAKE_IBV := $(BUILD)/tests/lib/libweft-fake-ibverbs.so
$(FAKE_IBV): tests/fakes/ibverbs/fake_ibverbs.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -shared -o $@ $<
$(BUILD)/tests/unit/test_net_ib_data: | $(FAKE_IBV)

# The CUDA tests dlopen a stand-in driver (tests/fakes/cuda/, fake.h says what it models) named by
# WEFT_CUDA_DRIVER_LIB; only its cu* functions and fake_cuda_* test hooks are exported.
FAKE_CUDA := $(BUILD)/tests/lib/libweft-fake-cuda.so
$(FAKE_CUDA): $(wildcard tests/fakes/cuda/*.c) tests/fakes/cuda/fake.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -fvisibility=hidden -shared -o $@ $(filter %.c,$^) -pthread
$(BUILD)/tests/unit/test_cuda_rt $(BUILD)/tests/unit/test_cuda_vmm $(BUILD)/tests/unit/test_fake_cuda \
  $(BUILD)/tests/multirank/test_cuda_mem $(BUILD)/tests/multirank/test_topo_order: | $(FAKE_CUDA)
# The IPC path's tests load a stand-in libweft-cuda.so (tests/fakes/cuda_kernels/) that runs weft's
# host reductions as host functions on the stand-in driver's streams.
FAKE_KERNELS := $(BUILD)/tests/lib/libweft-fake-cuda-kernels.so
$(FAKE_KERNELS): tests/fakes/cuda_kernels/kernels.c $(ARITH_REF_OBJS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -fvisibility=hidden -Iinclude -Isrc/arith -Isrc/kernels -shared -o $@ $^ -ldl -lm
$(BUILD)/tests/multirank/test_cuda_stream $(BUILD)/tests/multirank/test_perf: | $(FAKE_CUDA) $(FAKE_KERNELS)

# The multi-host suite's link with latency (netns.sh --wire-delay): no libraries.
$(DELAY_HUB): tests/multihost/delay_hub.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -o $@ $<

# Every folder's include rule (its README's "May include:" line), and no
# circle of includes or calls across layers (scripts/check-includes.py).
.PHONY: check-includes
check-includes: $(LIB_OBJS)
	python3 scripts/check-includes.py --objects $(BUILD)/obj
