# trainer.mk — the reference GPT trainer (trainer/, weft-train): its objects
# (main.c apart) are shared with its tests, and it links the parallel layer,
# libweft.so and OpenBLAS.
TRAIN_SRCS  := $(filter-out trainer/main.c,$(wildcard trainer/*.c))
TRAIN_OBJS  := $(TRAIN_SRCS:%.c=$(BUILD)/obj/%.o)
TRAIN_MAIN  := $(BUILD)/obj/trainer/main.o
TRAIN_BIN   := $(BUILD)/bin/weft-train
TRAIN_UNIT  := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test_trainer*.c))
TRAIN_MULTI := $(patsubst tests/multirank/%.c,$(BUILD)/tests/multirank/%,$(wildcard tests/multirank/test_trainer*.c))
ALL += $(TRAIN_BIN)

$(TRAIN_OBJS) $(TRAIN_MAIN): $(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) $(KERNEL_OPT) -Iparallel -Itrainer -Itools/common -MMD -MP -c $< -o $@

$(TRAIN_BIN): $(TRAIN_MAIN) $(TRAIN_OBJS) $(TOOLS_COMMON) $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $(TRAIN_MAIN) $(TRAIN_OBJS) $(TOOLS_COMMON) $(PAR_LINK) $(LDLIBS)

$(TRAIN_UNIT): $(BUILD)/tests/unit/%: tests/unit/%.c $(TRAIN_OBJS) $(TOOLS_COMMON) $(PAR_LIB) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iparallel -Itrainer -o $@ $< $(TRAIN_OBJS) $(TOOLS_COMMON) $(PAR_LINK) -lcriterion $(LDLIBS)

$(TRAIN_MULTI): $(BUILD)/tests/multirank/%: tests/multirank/%.c tests/multirank/harness.h $(TRAIN_BIN)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Itests/multirank -o $@ $< -L$(BUILD)/lib -lweft -Wl,-rpath,$(abspath $(BUILD)/lib) -lcriterion $(LDLIBS)

-include $(TRAIN_OBJS:.o=.d) $(TRAIN_MAIN:.o=.d)
