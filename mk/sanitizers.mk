# sanitizers.mk — the whole suite under ASan+UBSan (test-asan), the threaded
# uses under TSan (test-tsan), and the libFuzzer targets (fuzz, test-fuzz).
.PHONY: test-asan test-tsan fuzz test-fuzz

test-asan:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp) WEFT_TEST_TIME_SCALE=3 \
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test

# ThreadSanitizer: the library built again with clang -fsanitize=thread in
# $(TSAN_BUILD)/, and tests/tsan/threads.c (the threaded uses) run against it,
# over shared memory and again over the network transport.
TSAN_BUILD ?= build-tsan
TSAN_SAN   := -fsanitize=thread -fno-omit-frame-pointer

test-tsan:
	$(MAKE) BUILD=$(TSAN_BUILD) CC=clang OPT=-O1 SAN="$(TSAN_SAN)" $(TSAN_BUILD)/lib/libweft.so
	clang -std=c11 -Wall -Wextra -Werror -O1 -g -D_GNU_SOURCE $(TSAN_SAN) -Iinclude -o $(TSAN_BUILD)/tsan-threads \
	  tests/tsan/threads.c -L$(TSAN_BUILD)/lib -lweft -Wl,-rpath,$(abspath $(TSAN_BUILD)/lib) -pthread
	NCCL_SOCKET_IFNAME=lo TSAN_OPTIONS="halt_on_error=1 exitcode=66" timeout 300 $(TSAN_BUILD)/tsan-threads
	@# The same over the network transport (loopback), whose proxy and waiting ranks share connections.
	NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo TSAN_OPTIONS="halt_on_error=1 exitcode=66" timeout 300 $(TSAN_BUILD)/tsan-threads

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

-include $(FUZZ_OBJS:.o=.d) $(FUZZ_BINS:=.d)
