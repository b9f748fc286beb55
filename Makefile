# weft — one entry point: make, make test, make demo, make install.
#
# Outputs go to build/: build/lib/libweft.so and build/lib/libnccl.so.2 (the
# same code under NCCL's SONAME), build/bin/ for programs, build/tests/ for
# test binaries. `make test-asan` builds everything again in build-asan/ with
# AddressSanitizer and UndefinedBehaviorSanitizer and runs the same tests.

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= gcc
SAN     ?=
OPT     ?= -O2
# The parallel layer's and the trainer's element-wise loops need -O3 to be
# vectorised (GCC 12's -O2 vectorises only loops of known trip count;
# -fno-trapping-math lets it if-convert the clamps of float compares, and
# -fno-math-errno inline sqrtf; neither changes a result).
KERNEL_OPT ?= $(if $(SAN),,-O3) -fno-trapping-math -fno-math-errno
VERSION := 0.1.0

XML_CFLAGS := $(shell pkg-config --cflags libxml-2.0 2>/dev/null || echo -I/usr/include/libxml2)
INCLUDES := -Iinclude -Isrc -Ialgorithms -Itransports -Itopology -Iplugins -Iplugins/net -Iplugins/tuner \
            -Iplugins/profiler $(XML_CFLAGS)
CFLAGS_BASE := -std=c11 -Wall -Wextra -Werror $(OPT) -g -fPIC -D_GNU_SOURCE -pthread $(SAN)
LIB_CFLAGS  := $(CFLAGS_BASE) -fvisibility=hidden $(INCLUDES)
PROG_CFLAGS := $(CFLAGS_BASE) -Iinclude
LDLIBS      := -pthread -lm -ldl -lhwloc -lxml2 -lnuma

LIB_SRCS := $(wildcard src/*.c) $(wildcard transports/*.c) $(wildcard algorithms/*.c) $(wildcard topology/*.c)
# NCCL plugin ABIs (plugins/): the loaders are part of the library.
LIB_SRCS += plugins/plugin_dl.c $(wildcard plugins/net/*.c) $(wildcard plugins/tuner/*.c) $(wildcard plugins/profiler/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)

LIB_WEFT := $(BUILD)/lib/libweft.so
LIB_NCCL := $(BUILD)/lib/libnccl.so.2
RPATH    := -Wl,-rpath,'$$ORIGIN/../lib'

PERF_SRCS := $(wildcard perf/*_perf.c)
PERF_BINS := $(PERF_SRCS:perf/%.c=$(BUILD)/bin/%)

PROGS := $(BUILD)/bin/weftrun $(BUILD)/bin/weft-demo $(BUILD)/bin/weft-env $(BUILD)/bin/weft-sim $(PERF_BINS) \
         $(BUILD)/bin/weft-plan $(BUILD)/bin/weft-calibrate $(BUILD)/bin/weft-topo $(BUILD)/bin/weft-status

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
MULTI_SRCS := $(wildcard tests/multirank/test_*.c)
MULTI_BINS := $(MULTI_SRCS:tests/multirank/%.c=$(BUILD)/tests/multirank/%)
PROG_SRCS  := $(wildcard tests/multirank/progs/*.c)
TEST_PROGS := $(PROG_SRCS:tests/multirank/progs/%.c=$(BUILD)/tests/progs/%)

# The planner is a tool on top of weft, not part of the library: libm only.
PLAN_SRCS  := $(wildcard parallel/plan*.c)
PLAN_OBJS  := $(PLAN_SRCS:%.c=$(BUILD)/obj/%.o)
PLAN_TESTS := $(filter $(BUILD)/tests/unit/test_plan%,$(UNIT_BINS))

# The parallel layer (mesh, ZeRO, TP/SP, PP): public API only, a static
# library that programs link together with libweft.so and OpenBLAS.
PAR_SRCS  := $(filter-out parallel/plan%,$(wildcard parallel/*.c))
PAR_OBJS  := $(PAR_SRCS:%.c=$(BUILD)/obj/%.o)
PAR_LIB   := $(BUILD)/lib/libweft-parallel.a
PAR_LINK  := $(PAR_LIB) -L$(BUILD)/lib -lweft -Wl,-rpath,$(abspath $(BUILD)/lib) -lopenblas
PAR_UNIT  := $(filter $(BUILD)/tests/unit/test_parallel%,$(UNIT_BINS))
PAR_MULTI := $(filter $(BUILD)/tests/multirank/test_parallel%,$(MULTI_BINS))

# The reference GPT trainer: its objects (main.c apart) are shared with its
# tests, and it links the parallel layer, libweft.so and OpenBLAS.
TRAIN_SRCS  := $(filter-out trainer/main.c,$(wildcard trainer/*.c))
TRAIN_OBJS  := $(TRAIN_SRCS:%.c=$(BUILD)/obj/%.o)
TRAIN_BIN   := $(BUILD)/bin/weft-train
TRAIN_UNIT  := $(filter $(BUILD)/tests/unit/test_trainer%,$(UNIT_BINS))
TRAIN_MULTI := $(filter $(BUILD)/tests/multirank/test_trainer%,$(MULTI_BINS))

DEPS_STAMP := $(BUILD)/.deps-ok

# The example NCCL net plugin: its own TCP code and net_abi.h, no libweft.
NET_EXAMPLE := $(BUILD)/lib/libnccl-net-example.so

.PHONY: all test test-asan test-tsan demo install clean deps docs check-docs fuzz test-fuzz
all: $(LIB_WEFT) $(LIB_NCCL) $(BUILD)/lib/libnccl.so $(NET_EXAMPLE) $(PROGS) $(PAR_LIB) $(BUILD)/bin/weft-parallel-example $(TRAIN_BIN)

# Install the Debian packages weft needs, once, if a header is missing.
$(DEPS_STAMP):
	@if [ ! -f /usr/include/criterion/criterion.h ] || [ ! -f /usr/include/infiniband/verbs.h ] || \
	  [ ! -f /usr/include/numa.h ] || ! command -v pkg-config >/dev/null || \
	  ! echo '#include <cblas.h>' | $(CC) -E - >/dev/null 2>&1; then \
	  ./scripts/install-deps.sh; fi
	@mkdir -p $(@D) && touch $@
deps:
	./scripts/install-deps.sh

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(LIB_WEFT): $(LIB_OBJS) src/weft.map
	@mkdir -p $(@D)
	$(CC) -shared $(SAN) -Wl,-soname,libweft.so -Wl,--version-script=src/weft.map -o $@ $(LIB_OBJS) $(LDLIBS)

$(LIB_NCCL): $(LIB_OBJS) src/weft.map
	@mkdir -p $(@D)
	$(CC) -shared $(SAN) -Wl,-soname,libnccl.so.2 -Wl,--version-script=src/weft.map -o $@ $(LIB_OBJS) $(LDLIBS)

$(BUILD)/lib/libnccl.so: $(LIB_NCCL)
	ln -sf libnccl.so.2 $@

$(NET_EXAMPLE): $(wildcard plugins/net/example/*.c) $(wildcard plugins/net/example/*.h) plugins/net/net_abi.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -fvisibility=hidden -Iinclude -Iplugins/net -shared -o $@ $(filter %.c,$^) -pthread
$(BUILD)/tests/unit/test_net_plugin $(BUILD)/tests/multirank/test_net_plugin: | $(NET_EXAMPLE)

# Programs use the public API through libweft.so ...
$(BUILD)/bin/weftrun $(BUILD)/bin/weft-demo $(BUILD)/bin/weft-calibrate: $(BUILD)/bin/%: $(LIB_WEFT)
$(BUILD)/bin/weftrun: tools/weftrun.c
$(BUILD)/bin/weft-demo: tools/weft_demo.c
$(BUILD)/bin/weft-calibrate: tools/weft_calibrate.c
$(BUILD)/bin/weftrun $(BUILD)/bin/weft-demo $(BUILD)/bin/weft-calibrate:
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $(filter %.c,$^) -L$(BUILD)/lib -lweft $(RPATH) $(LDLIBS)

# nccl-tests-style benchmarks: one small file per collective + the shared driver.
PERF_COMMON := perf/common.c perf/common_args.c perf/common_check.c perf/common_device.c perf/common_out.c
$(BUILD)/bin/%_perf: perf/%_perf.c $(PERF_COMMON) perf/common.h perf/common_internal.h $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iperf -o $@ $< $(PERF_COMMON) -L$(BUILD)/lib -lweft $(RPATH) $(LDLIBS)

# ... except weft-env (prints the internal knob table), weft-sim (runs the
# internal schedules through the simulator), weft-topo (the topology
# module) and weft-status (reads ranks' segment headers), which link the objects.
$(BUILD)/bin/weft-env: tools/weft_env.c
$(BUILD)/bin/weft-sim: tools/weft_sim_check.c tools/weft_sim_cost.c tools/weft_sim_cost.h
$(BUILD)/bin/weft-topo: tools/weft_topo.c
$(BUILD)/bin/weft-status: tools/weft_status.c
$(BUILD)/bin/weft-env $(BUILD)/bin/weft-sim $(BUILD)/bin/weft-topo $(BUILD)/bin/weft-status: $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -o $@ $(filter-out %.h,$^) $(LDLIBS)

# weft-plan and its tests link the planner's objects, built like a program's.
$(PLAN_OBJS): $(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -MMD -MP -c $< -o $@

$(BUILD)/bin/weft-plan: tools/weft_plan.c $(PLAN_OBJS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -o $@ $^ -lm

$(PLAN_TESTS): $(BUILD)/tests/unit/%: tests/unit/%.c $(PLAN_OBJS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -o $@ $^ -lcriterion -lm

# The parallel layer: objects built like a program's, archived; its example
# program and its tests link the archive, libweft.so and OpenBLAS.
$(PAR_OBJS): $(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) $(KERNEL_OPT) -Iparallel -MMD -MP -c $< -o $@

$(PAR_LIB): $(PAR_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/weft-parallel-example: tools/weft_parallel_example.c $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -o $@ $< $(PAR_LIB) -L$(BUILD)/lib -lweft $(RPATH) -lopenblas $(LDLIBS)

$(PAR_UNIT): $(BUILD)/tests/unit/%: tests/unit/%.c $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -o $@ $< $(PAR_LINK) -lcriterion $(LDLIBS)

$(PAR_MULTI): $(BUILD)/tests/multirank/%: tests/multirank/%.c tests/multirank/harness.h $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -Itests/multirank -o $@ $< $(PAR_LINK) -lcriterion $(LDLIBS)

$(TRAIN_OBJS) $(BUILD)/obj/trainer/main.o: $(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) $(KERNEL_OPT) -Iparallel -Itrainer -MMD -MP -c $< -o $@

$(TRAIN_BIN): $(BUILD)/obj/trainer/main.o $(TRAIN_OBJS) $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $(BUILD)/obj/trainer/main.o $(TRAIN_OBJS) $(PAR_LINK) $(LDLIBS)

$(TRAIN_UNIT): $(BUILD)/tests/unit/%: tests/unit/%.c $(TRAIN_OBJS) $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -Itrainer -o $@ $< $(TRAIN_OBJS) $(PAR_LINK) -lcriterion $(LDLIBS)

$(TRAIN_MULTI): $(BUILD)/tests/multirank/%: tests/multirank/%.c tests/multirank/harness.h $(TRAIN_BIN)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Itests/multirank -o $@ $< -L$(BUILD)/lib -lweft -Wl,-rpath,$(abspath $(BUILD)/lib) -lcriterion $(LDLIBS)

# Unit tests link the objects directly (internal symbols are hidden in the .so).
$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -o $@ $^ -lcriterion $(LDLIBS)

# The verbs backend's data-path test dlopens a stand-in libibverbs (tests/unit/fake_ibverbs.c).
FAKE_IBV := $(BUILD)/tests/lib/libweft-fake-ibverbs.so
$(FAKE_IBV): tests/unit/fake_ibverbs.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -shared -o $@ $<
$(BUILD)/tests/unit/test_net_ib_data: | $(FAKE_IBV)

# The CUDA tests dlopen a stand-in driver (tests/fake_cuda/, fake.h says what it models) named by
# WEFT_CUDA_DRIVER_LIB; only its cu* functions and fake_cuda_* test hooks are exported.
FAKE_CUDA := $(BUILD)/tests/lib/libweft-fake-cuda.so
$(FAKE_CUDA): $(wildcard tests/fake_cuda/*.c) tests/fake_cuda/fake.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -fvisibility=hidden -shared -o $@ $(filter %.c,$^) -pthread
$(BUILD)/tests/unit/test_cuda_rt $(BUILD)/tests/unit/test_cuda_vmm $(BUILD)/tests/unit/test_fake_cuda $(BUILD)/tests/multirank/test_cuda_mem: | $(FAKE_CUDA)
# The direct path's tests load a stand-in libweft-cuda.so (tests/fake_cuda_kernels/) that runs weft's
# host reductions as host functions on the stand-in driver's streams.
FAKE_KERNELS := $(BUILD)/tests/lib/libweft-fake-cuda-kernels.so
$(FAKE_KERNELS): tests/fake_cuda_kernels/kernels.c $(addprefix $(BUILD)/obj/src/,reduce.o reduce_int.o reduce_float.o dtype.o) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -fvisibility=hidden -Iinclude -Isrc -shared -o $@ $^ -ldl -lm
$(BUILD)/tests/multirank/test_cuda_stream $(BUILD)/tests/multirank/test_perf: | $(FAKE_CUDA) $(FAKE_KERNELS)
$(BUILD)/tests/multirank/test_cuda_mem $(BUILD)/tests/multirank/test_cuda_stream: tests/multirank/cuda_driver.h

$(BUILD)/tests/multirank/%: tests/multirank/%.c tests/multirank/harness.h $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Itests/multirank -o $@ $< -L$(BUILD)/lib -lweft -Wl,-rpath,$(abspath $(BUILD)/lib) -lcriterion $(LDLIBS)

$(BUILD)/tests/progs/%: tests/multirank/progs/%.c $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< -L$(BUILD)/lib -lweft -Wl,-rpath,$(abspath $(BUILD)/lib) $(LDLIBS)

# The multi-host suite's link with latency (netns.sh --wire-delay): no libraries.
DELAY_HUB := $(BUILD)/tests/multihost/delay_hub
$(DELAY_HUB): tests/multihost/delay_hub.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -o $@ $<

test: all $(UNIT_BINS) $(MULTI_BINS) $(TEST_PROGS) $(DELAY_HUB)
	@WEFT_BUILD_DIR=$(BUILD) ./tests/run.sh $(BUILD)

test-asan:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp) \
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test

# ThreadSanitizer: the library built again with clang -fsanitize=thread in
# $(TSAN_BUILD)/, and tests/tsan/threads.c (the threaded uses) run against it.
TSAN_BUILD ?= build-tsan
TSAN_SAN   := -fsanitize=thread -fno-omit-frame-pointer

test-tsan:
	$(MAKE) BUILD=$(TSAN_BUILD) CC=clang OPT=-O1 SAN="$(TSAN_SAN)" $(TSAN_BUILD)/lib/libweft.so
	clang -std=c11 -Wall -Wextra -Werror -O1 -g -D_GNU_SOURCE $(TSAN_SAN) -Iinclude -o $(TSAN_BUILD)/tsan-threads \
	  tests/tsan/threads.c -L$(TSAN_BUILD)/lib -lweft -Wl,-rpath,$(abspath $(TSAN_BUILD)/lib) -pthread
	NCCL_SOCKET_IFNAME=lo TSAN_OPTIONS="halt_on_error=1 exitcode=66" timeout 300 $(TSAN_BUILD)/tsan-threads

# Fuzz targets (tests/fuzz/README.md): libFuzzer via clang, linked against
# the library's objects built again with ASan+UBSan and coverage in
# $(FUZZ_BUILD)/ (an archive, so a target may include a .c file to reach its
# static functions). `make test-fuzz` runs each for FUZZ_SECONDS and fails on
# any crash, leak, timeout or out-of-memory.
FUZZ_BUILD   ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -Wall -Wextra -Werror -O1 -g -fPIC -D_GNU_SOURCE -pthread $(FUZZ_SAN) \
                -fvisibility=hidden $(INCLUDES)
FUZZ_OBJS    := $(LIB_SRCS:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_LIB     := $(FUZZ_BUILD)/libweft-fuzz.a
FUZZ_SRCS    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS    := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_BUILD)/%)

$(FUZZ_BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(FUZZ_OBJS)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FUZZ_LIB) $(LDLIBS)

fuzz: $(FUZZ_BINS)

test-fuzz: $(FUZZ_BINS)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) ./tests/fuzz/run.sh $(FUZZ_BUILD)

# The demo: every collective checked on 4 ranks, then a GPT trained on 4
# ranks as tensor parallel 2 x data parallel 2 (ZeRO-1), then as pipeline
# parallel 2 x data parallel 2 (1F1B over 2 micro-batches).
demo: all
	NCCL_SOCKET_IFNAME=$${NCCL_SOCKET_IFNAME:-lo} $(BUILD)/bin/weftrun -n 4 $(BUILD)/bin/weft-demo
	NCCL_SOCKET_IFNAME=$${NCCL_SOCKET_IFNAME:-lo} $(BUILD)/bin/weftrun -n 4 $(BUILD)/bin/weft-train --tp 2 --dp 2 --zero 1 \
	  --log $(BUILD)/demo-train.csv --plot $(BUILD)/demo-train.png
	NCCL_SOCKET_IFNAME=$${NCCL_SOCKET_IFNAME:-lo} $(BUILD)/bin/weftrun -n 4 $(BUILD)/bin/weft-train --pp 2 --dp 2 --zero 1 \
	  --micro-batches 2 --steps 1000 --log $(BUILD)/demo-train-pp.csv --plot $(BUILD)/demo-train-pp.png

docs: $(BUILD)/bin/weft-env
	$(BUILD)/bin/weft-env --markdown > docs/env.md

check-docs: $(BUILD)/bin/weft-env
	@$(BUILD)/bin/weft-env --markdown | diff -u docs/env.md - && echo "docs/env.md is current"

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(LIB_WEFT) $(LIB_NCCL) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libnccl.so.2 $(DESTDIR)$(PREFIX)/lib/libnccl.so
	install -m 644 include/nccl.h include/nccl_device.h include/weft.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/bin/weftrun $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' weft.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/weft.pc

# Example tuner and profiler plugins: built from their ABI header alone
# (no libweft), as a third party would; `make` puts them in build/lib.
TP_PLUGIN_EXAMPLES := $(BUILD)/lib/libnccl-tuner-example.so $(BUILD)/lib/libnccl-profiler-example.so
all: $(TP_PLUGIN_EXAMPLES)
$(BUILD)/lib/libnccl-tuner-example.so: plugins/tuner/example/tuner_example.c plugins/tuner/tuner_abi.h plugins/plugin_log_abi.h
$(BUILD)/lib/libnccl-profiler-example.so: plugins/profiler/example/profiler_example.c plugins/profiler/profiler_abi.h plugins/plugin_log_abi.h
$(TP_PLUGIN_EXAMPLES):
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -shared -fvisibility=hidden -Iinclude -I$(dir $(firstword $(filter %.h,$^))) -o $@ $(filter %.c,$^)
# The same examples exporting only their v4 symbol, for the v4 loaders' test.
TP_PLUGIN_V4 := $(BUILD)/tests/plugins/libnccl-tuner-v4only.so $(BUILD)/tests/plugins/libnccl-profiler-v4only.so
$(BUILD)/tests/plugins/libnccl-tuner-v4only.so: plugins/tuner/example/tuner_example.c plugins/tuner/tuner_abi.h plugins/plugin_log_abi.h
$(BUILD)/tests/plugins/libnccl-profiler-v4only.so: plugins/profiler/example/profiler_example.c plugins/profiler/profiler_abi.h plugins/plugin_log_abi.h
$(TP_PLUGIN_V4):
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -DWEFT_EXAMPLE_V4_ONLY -shared -fvisibility=hidden -Iinclude -I$(dir $(firstword $(filter %.h,$^))) \
	  -o $@ $(filter %.c,$^)
$(BUILD)/tests/multirank/test_plugins_tp: $(TP_PLUGIN_EXAMPLES) $(TP_PLUGIN_V4)

# ---- CUDA device backend (src/cuda/README.md) -------------------------------
# Where nvcc is found, src/cuda/*.cu become build/lib/libweft-cuda.so (sm_80,
# sm_90 and compute_90 PTX; shared libcudart), a module libweft dlopens, and
# tests/gpu/*.cu become programs tests/run.sh runs (they skip without a GPU).
# Without nvcc this prints one line and builds nothing here. Nothing else is
# ever compiled by nvcc. The functors' host test (tests/unit/test_cuda_ops)
# needs only the C++ compiler and is built everywhere.
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
NVCC := $(NVCC)
CUDA_LIB       := $(BUILD)/lib/libweft-cuda.so
CUDA_SRCS      := $(wildcard src/cuda/*.cu)
CUDA_HDRS      := $(wildcard src/cuda/*.h src/cuda/*.cuh) src/reduce.h include/nccl.h
CUDA_GPU_SRCS  := $(wildcard tests/gpu/test_*.cu)
CUDA_GPU_BINS  := $(CUDA_GPU_SRCS:tests/gpu/%.cu=$(BUILD)/tests/gpu/%)
NVCC_GENCODE   := -gencode arch=compute_80,code=sm_80 -gencode 'arch=compute_90,code=[sm_90,compute_90]'
# IEEE float everywhere (no FMA contraction, denormals kept, exact division):
# results must match the host backend bit for bit.
NVCC_FLAGS     := -std=c++17 -O3 -g -fmad=false -ftz=false -prec-div=true -prec-sqrt=true \
                  -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra -Iinclude -Isrc -Isrc/cuda
# The library objects the GPU tests take their host reference from.
CUDA_REF_OBJS  := $(addprefix $(BUILD)/obj/src/,reduce.o reduce_int.o reduce_float.o dtype.o)

.PHONY: cuda
ifneq ($(NVCC),)
all: $(CUDA_LIB)
# Sanitizer builds (make test-asan) leave the GPU tests out: their host
# reference objects are instrumented and nvcc links without the runtime.
test: $(if $(SAN),,$(CUDA_GPU_BINS))
cuda: $(CUDA_LIB) $(CUDA_GPU_BINS)
$(CUDA_LIB): $(CUDA_SRCS) $(CUDA_HDRS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) $(NVCC_GENCODE) -shared -cudart shared -o $@ $(CUDA_SRCS)
$(BUILD)/tests/gpu/%: tests/gpu/%.cu $(CUDA_LIB) $(CUDA_HDRS) $(CUDA_REF_OBJS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) $(NVCC_GENCODE) -cudart shared -o $@ $< $(CUDA_REF_OBJS) \
	  -L$(BUILD)/lib -lweft-cuda -Xlinker -rpath,$(abspath $(BUILD)/lib) -lm
else
all: cuda-skip-note
cuda: cuda-skip-note
.PHONY: cuda-skip-note
cuda-skip-note:
	@echo "weft: nvcc not found; skipping the CUDA backend (src/cuda/, tests/gpu/)"
endif

# Host C++ shim that runs the device functors on the CPU for the unit test.
CUDA_SHIM_OBJ := $(BUILD)/obj/tests/unit/cuda_ops_shim.o
$(CUDA_SHIM_OBJ): tests/unit/cuda_ops_shim.cpp | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -Wall -Wextra -Werror $(OPT) -g -fPIC $(SAN) -ffp-contract=off -fno-exceptions \
	  -fno-rtti -fno-threadsafe-statics -DWEFT_NO_CUDA -Iinclude -Isrc -Isrc/cuda -MMD -MP -c $< -o $@
$(BUILD)/tests/unit/test_cuda_ops: $(CUDA_SHIM_OBJ)
-include $(CUDA_SHIM_OBJ:.o=.d)
# ---- end of the CUDA device backend block -----------------------------------

clean:
	rm -rf build build-asan $(FUZZ_BUILD) $(TSAN_BUILD)

-include $(LIB_OBJS:.o=.d) $(PLAN_OBJS:.o=.d) $(PAR_OBJS:.o=.d) $(TRAIN_OBJS:.o=.d) $(BUILD)/obj/trainer/main.d \
         $(FUZZ_OBJS:.o=.d) $(FUZZ_BINS:=.d)
