# parallel.mk — the parallel layer (parallel/: mesh, ZeRO, TP/SP, CP, MoE/EP, PP): public
# API only, a static library that programs link together with libweft.so and
# OpenBLAS.
PAR_SRCS  := $(wildcard parallel/*.c)
PAR_OBJS  := $(PAR_SRCS:%.c=$(BUILD)/obj/%.o)
PAR_LIB   := $(BUILD)/lib/libweft-parallel.a
PAR_LINK  := $(PAR_LIB) -L$(BUILD)/lib -lweft -Wl,-rpath,$(abspath $(BUILD)/lib) -lopenblas
PAR_UNIT  := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test_parallel*.c))
PAR_MULTI := $(patsubst tests/multirank/%.c,$(BUILD)/tests/multirank/%,$(wildcard tests/multirank/test_parallel*.c))
ALL += $(PAR_LIB) $(BUILD)/bin/weft-parallel-example

$(PAR_OBJS): $(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) $(KERNEL_OPT) -Iparallel -MMD -MP -c $< -o $@

$(PAR_LIB): $(PAR_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# The layer's example program (tools/weft_parallel_example.c).
$(BUILD)/bin/weft-parallel-example: tools/weft_parallel_example.c $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -o $@ $< $(PAR_LIB) -L$(BUILD)/lib -lweft $(RPATH) -lopenblas $(LDLIBS)

$(PAR_UNIT): $(BUILD)/tests/unit/%: tests/unit/%.c $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -o $@ $< $(PAR_LINK) -lcriterion $(LDLIBS)

$(PAR_MULTI): $(BUILD)/tests/multirank/%: tests/multirank/%.c tests/multirank/harness.h $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -Itests/multirank -o $@ $< $(PAR_LINK) -lcriterion $(LDLIBS)

-include $(PAR_OBJS:.o=.d)
