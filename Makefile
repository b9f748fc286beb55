# weft — one entry point: make, make test, make demo, make install.
#
# This file is the index; each part of the build lives in a fragment of mk/
# (see mk/README.md). Outputs go to build/: build/lib/libweft.so and
# build/lib/libnccl.so.2 (the same code under NCCL's SONAME), build/bin/ for
# programs, build/tests/ for test binaries. `make test-asan` builds
# everything again in build-asan/ with AddressSanitizer and
# UndefinedBehaviorSanitizer and runs the same tests.

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= gcc
SAN     ?=
OPT     ?= -O2
VERSION := 0.1.0

.DEFAULT_GOAL := all
# Each fragment adds what `make` builds to ALL and what `make test` needs to TEST_DEPS.
ALL       :=
TEST_DEPS :=

include mk/lib.mk
include mk/plugins.mk
include mk/cuda.mk
include mk/tools.mk
include mk/planner.mk
include mk/parallel.mk
include mk/trainer.mk
include mk/perf.mk
include mk/torch.mk
include mk/tests.mk
include mk/sanitizers.mk
include mk/install.mk

.PHONY: all test demo clean
all: $(ALL)

test: all $(TEST_DEPS)
	@WEFT_BUILD_DIR=$(BUILD) ./tests/run.sh $(BUILD)

# The demo: every collective checked on 4 ranks, then a GPT trained on 4
# ranks as tensor parallel 2 x data parallel 2 (ZeRO-1), then as pipeline
# parallel 2 x data parallel 2 (1F1B over 2 micro-batches).
demo: all
	NCCL_SOCKET_IFNAME=$${NCCL_SOCKET_IFNAME:-lo} $(BUILD)/bin/weftrun -n 4 $(BUILD)/bin/weft-demo
	NCCL_SOCKET_IFNAME=$${NCCL_SOCKET_IFNAME:-lo} $(BUILD)/bin/weftrun -n 4 $(BUILD)/bin/weft-train --tp 2 --dp 2 --zero 1 \
	  --log $(BUILD)/demo-train.csv --plot $(BUILD)/demo-train.png
	NCCL_SOCKET_IFNAME=$${NCCL_SOCKET_IFNAME:-lo} $(BUILD)/bin/weftrun -n 4 $(BUILD)/bin/weft-train --pp 2 --dp 2 --zero 1 \
	  --micro-batches 2 --steps 1000 --log $(BUILD)/demo-train-pp.csv --plot $(BUILD)/demo-train-pp.png

clean:
	rm -rf build build-asan $(FUZZ_BUILD) $(TSAN_BUILD)
