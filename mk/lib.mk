# lib.mk — libweft: the core (src/), the transports, the algorithms, the
# topology and the plugin loaders, as build/lib/libweft.so and, the same
# objects under NCCL's SONAME, build/lib/libnccl.so.2.

# The parallel layer's and the trainer's element-wise loops need -O3 to be
# vectorised (GCC 12's -O2 vectorises only loops of known trip count;
# -fno-trapping-math lets it if-convert the clamps of float compares, and
# -fno-math-errno inline sqrtf; neither changes a result).
KERNEL_OPT ?= $(if $(SAN),,-O3) -fno-trapping-math -fno-math-errno

# The library's rooms (docs/architecture.md); each is on the include path,
# and its README says which of the others it may include (make check-includes).
LIB_DIRS := src/base src/arith src/boot src/core src/cuda \
            transports transports/shm transports/net transports/ib \
            src/ras algorithms algorithms/sim topology plugins plugins/net plugins/tuner plugins/profiler plugins/env
XML_CFLAGS  := $(shell pkg-config --cflags libxml-2.0 2>/dev/null || echo -I/usr/include/libxml2)
INCLUDES    := -Iinclude $(addprefix -I,$(LIB_DIRS)) -Isrc/kernels $(XML_CFLAGS)
CFLAGS_BASE := -std=c11 -Wall -Wextra -Werror $(OPT) -g -fPIC -D_GNU_SOURCE -pthread $(SAN)
LIB_CFLAGS  := $(CFLAGS_BASE) -fvisibility=hidden $(INCLUDES)
PROG_CFLAGS := $(CFLAGS_BASE) -Iinclude
LDLIBS      := -pthread -lm -ldl -lhwloc -lxml2 -lnuma

LIB_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
LIB_MAP  := mk/weft.map

LIB_WEFT := $(BUILD)/lib/libweft.so
LIB_NCCL := $(BUILD)/lib/libnccl.so.2
RPATH    := -Wl,-rpath,'$$ORIGIN/../lib'
ALL      += $(LIB_WEFT) $(LIB_NCCL) $(BUILD)/lib/libnccl.so

# Install the Debian packages weft needs, once, if a header is missing.
DEPS_STAMP := $(BUILD)/.deps-ok
$(DEPS_STAMP):
	@if [ ! -f /usr/include/criterion/criterion.h ] || [ ! -f /usr/include/infiniband/verbs.h ] || \
	  [ ! -f /usr/include/numa.h ] || ! command -v pkg-config >/dev/null || ! command -v python3 >/dev/null || \
	  ! echo '#include <cblas.h>' | $(CC) -E - >/dev/null 2>&1; then \
	  ./scripts/install-deps.sh; fi
	@mkdir -p $(@D) && touch $@
.PHONY: deps
deps:
	./scripts/install-deps.sh

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(LIB_WEFT): $(LIB_OBJS) $(LIB_MAP)
	@mkdir -p $(@D)
	$(CC) -shared $(SAN) -Wl,-soname,libweft.so -Wl,--version-script=$(LIB_MAP) -o $@ $(LIB_OBJS) $(LDLIBS)

$(LIB_NCCL): $(LIB_OBJS) $(LIB_MAP)
	@mkdir -p $(@D)
	$(CC) -shared $(SAN) -Wl,-soname,libnccl.so.2 -Wl,--version-script=$(LIB_MAP) -o $@ $(LIB_OBJS) $(LDLIBS)

$(BUILD)/lib/libnccl.so: $(LIB_NCCL)
	ln -sf libnccl.so.2 $@

-include $(LIB_OBJS:.o=.d)
