# tools.mk — weftrun and the weft-* programs (tools/), and the helpers every
# program shares (tools/common/: sizes on the command line, the clock).

TOOLS_COMMON := $(BUILD)/obj/tools/common/prog_util.o
$(TOOLS_COMMON): $(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -MMD -MP -c $< -o $@
-include $(TOOLS_COMMON:.o=.d)

# Programs use the public API through libweft.so ...
API_TOOLS := $(BUILD)/bin/weftrun $(BUILD)/bin/weft-demo $(BUILD)/bin/weft-calibrate
$(BUILD)/bin/weftrun: tools/weftrun.c
$(BUILD)/bin/weft-demo: tools/weft_demo.c
$(BUILD)/bin/weft-calibrate: tools/weft_calibrate.c
$(API_TOOLS): $(TOOLS_COMMON) $(LIB_WEFT)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -Itools/common -o $@ $(filter %.c %.o,$^) -L$(BUILD)/lib -lweft $(RPATH) $(LDLIBS)

# ... except weft-env (prints the internal knob table), weft-sim (runs the
# internal schedules through the simulator), weft-topo (the topology
# module) and weft-status (reads ranks' segment headers), which link the objects.
INTERNAL_TOOLS := $(BUILD)/bin/weft-env $(BUILD)/bin/weft-sim $(BUILD)/bin/weft-topo $(BUILD)/bin/weft-status
$(BUILD)/bin/weft-env: tools/weft_env.c
$(BUILD)/bin/weft-sim: tools/weft_sim_check.c tools/weft_sim_cost.c tools/weft_sim_cost.h
$(BUILD)/bin/weft-topo: tools/weft_topo.c
$(BUILD)/bin/weft-status: tools/weft_status.c tools/weft_status_ras.c tools/weft_status_ras.h
$(INTERNAL_TOOLS): $(TOOLS_COMMON) $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -Itools/common -o $@ $(filter-out %.h,$^) $(LDLIBS)

ALL += $(API_TOOLS) $(INTERNAL_TOOLS)
