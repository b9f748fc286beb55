# planner.mk — weft-plan's model (planner/): a tool on top of weft, not part
# of the library; it links libm only, and so do its tests.
PLAN_SRCS  := $(wildcard planner/*.c)
PLAN_OBJS  := $(PLAN_SRCS:%.c=$(BUILD)/obj/%.o)
PLAN_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test_plan*.c))
ALL += $(BUILD)/bin/weft-plan

$(PLAN_OBJS): $(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iplanner -MMD -MP -c $< -o $@

$(BUILD)/bin/weft-plan: tools/weft_plan.c $(PLAN_OBJS) $(TOOLS_COMMON)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iplanner -Itools/common -o $@ $(filter %.c %.o,$^) -lm

$(PLAN_TESTS): $(BUILD)/tests/unit/%: tests/unit/%.c $(PLAN_OBJS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Iplanner -o $@ $^ -lcriterion -lm

-include $(PLAN_OBJS:.o=.d)
