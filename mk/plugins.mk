# plugins.mk — the example NCCL plugins (plugins/*/example/): each built from
# its ABI header alone, without libweft, as a third party would build it.

# The example net plugin: its own TCP code and net_abi.h.
NET_EXAMPLE := $(BUILD)/lib/libnccl-net-example.so
ALL += $(NET_EXAMPLE)
$(NET_EXAMPLE): $(wildcard plugins/net/example/*.c) $(wildcard plugins/net/example/*.h) plugins/net/net_abi.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -fvisibility=hidden -Iinclude -Iplugins/net -shared -o $@ $(filter %.c,$^) -pthread

# The same plugin exporting only ncclNetPlugin_v6 (which also keeps v6's
# 8-request table) or only _v7, as plugins written for older NCCL do.
NET_EXAMPLE_OLD := $(BUILD)/tests/plugins/libnccl-net-v6only.so $(BUILD)/tests/plugins/libnccl-net-v7only.so
$(NET_EXAMPLE_OLD): $(BUILD)/tests/plugins/libnccl-net-v%only.so: $(wildcard plugins/net/example/*.c) \
                    $(wildcard plugins/net/example/*.h) plugins/net/net_abi.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -DWEFT_EXAMPLE_NET_ONLY=$* -fvisibility=hidden -Iinclude -Iplugins/net -shared -o $@ \
	  $(filter %.c,$^) -pthread

# The example tuner and profiler plugins.
TP_PLUGIN_EXAMPLES := $(BUILD)/lib/libnccl-tuner-example.so $(BUILD)/lib/libnccl-profiler-example.so
ALL += $(TP_PLUGIN_EXAMPLES)
$(BUILD)/lib/libnccl-tuner-example.so: plugins/tuner/example/tuner_example.c plugins/tuner/tuner_abi.h plugins/plugin_log_abi.h
PROFILER_EXAMPLE_SRCS := plugins/profiler/example/profiler_example.c plugins/profiler/example/profiler_example_old.c \
                         plugins/profiler/profiler_abi.h plugins/profiler/profiler_abi_v1_v3.h \
                         plugins/profiler/example/profiler_example.h plugins/plugin_log_abi.h
$(BUILD)/lib/libnccl-profiler-example.so: $(PROFILER_EXAMPLE_SRCS)
$(TP_PLUGIN_EXAMPLES):
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -shared -fvisibility=hidden -Iinclude -I$(dir $(firstword $(filter %.h,$^))) -o $@ $(filter %.c,$^)

# The same examples exporting only their v4 symbol (and the tuner only its
# v2 one), for the old versions' loaders' tests.
TP_PLUGIN_V4 := $(BUILD)/tests/plugins/libnccl-tuner-v4only.so $(BUILD)/tests/plugins/libnccl-tuner-v2only.so
$(BUILD)/tests/plugins/libnccl-tuner-v4only.so: plugins/tuner/example/tuner_example.c plugins/tuner/tuner_abi.h plugins/plugin_log_abi.h
$(BUILD)/tests/plugins/libnccl-tuner-v2only.so: plugins/tuner/example/tuner_example.c plugins/tuner/tuner_abi.h plugins/plugin_log_abi.h
$(TP_PLUGIN_V4):
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(if $(findstring v2only,$@),-DWEFT_EXAMPLE_V2_ONLY,-DWEFT_EXAMPLE_V4_ONLY) -shared -fvisibility=hidden -Iinclude -I$(dir $(firstword $(filter %.h,$^))) \
	  -o $@ $(filter %.c,$^)

# The example profiler exporting only its ncclProfiler_vN, N = 1 ... 5 (its
# full build's newest is v6), for each version's loader's tests.
PROFILER_PLUGIN_OLD := $(foreach v,1 2 3 4 5,$(BUILD)/tests/plugins/libnccl-profiler-v$(v)only.so)
$(PROFILER_PLUGIN_OLD): $(BUILD)/tests/plugins/libnccl-profiler-v%only.so: $(PROFILER_EXAMPLE_SRCS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -DWEFT_EXAMPLE_ONLY_V=$* -shared -fvisibility=hidden -Iinclude -Iplugins/profiler \
	  -o $@ $(filter %.c,$^)

# The example env plugin (v2 and v1), and the same exporting only v1.
ENV_EXAMPLE := $(BUILD)/lib/libnccl-env-example.so
ENV_V1ONLY  := $(BUILD)/tests/plugins/libnccl-env-v1only.so
ALL += $(ENV_EXAMPLE)
$(ENV_EXAMPLE) $(ENV_V1ONLY): plugins/env/example/env_example.c plugins/env/env_abi.h plugins/plugin_log_abi.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(if $(findstring v1only,$@),-DWEFT_ENV_EXAMPLE_V1_ONLY) -shared -fvisibility=hidden -Iinclude -Iplugins/env \
	  -o $@ $(filter %.c,$^)
