# torch.mk — `make torch`: the torch.distributed backend "weft" (torch/)
# as the Python package build/python/weft_torch, built against the system's
# PyTorch (Debian's python3-torch and libtorch-dev, installed by
# scripts/install-deps.sh --torch when missing). Not part of `make all`;
# `make test` builds and tests it when Debian's torch is installed.

TORCH_PY   ?= /usr/bin/python3
TORCH_OUT  := $(BUILD)/python/weft_torch
TORCH_OBJ  := $(BUILD)/obj/torch
TORCH_OBJS := $(patsubst torch/%.cpp,$(TORCH_OBJ)/%.o,$(wildcard torch/*.cpp))
TORCH_EXT  := $(TORCH_OUT)/_C.so
# Include paths, C++ ABI and library paths as torch.utils.cpp_extension
# gives them, torch's headers as system headers so that their warnings do
# not fail -Werror (recursive variables: read only when a recipe runs).
TORCH_CFLAGS = $(shell $(TORCH_PY) -c "from torch.utils import cpp_extension as c; import sysconfig, torch; \
  print(' '.join('-isystem ' + p for p in c.include_paths() + [sysconfig.get_paths()['include']]), \
  '-D_GLIBCXX_USE_CXX11_ABI=%d' % int(torch._C._GLIBCXX_USE_CXX11_ABI))" 2>/dev/null)
TORCH_LDFLAGS = $(shell $(TORCH_PY) -c "from torch.utils import cpp_extension as c; \
  print(' '.join('-L' + p for p in c.library_paths()))" 2>/dev/null)

.PHONY: torch torch-deps
torch: $(TORCH_EXT) $(TORCH_OUT)/__init__.py

torch-deps:
	@$(TORCH_PY) -c "import torch, pybind11" 2>/dev/null || ./scripts/install-deps.sh --torch

$(TORCH_OBJ)/%.o: torch/%.cpp $(wildcard torch/*.hpp) include/nccl.h | torch-deps
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -g -fPIC -Wall -Wextra -Werror -DTORCH_EXTENSION_NAME=_C -DTORCH_API_INCLUDE_EXTENSION_H \
	  -Iinclude $(TORCH_CFLAGS) -c -o $@ $<

$(TORCH_EXT): $(TORCH_OBJS) $(BUILD)/lib/libweft.so
	@mkdir -p $(@D)
	$(CXX) -shared -o $@ $(TORCH_OBJS) $(TORCH_LDFLAGS) -ltorch -ltorch_cpu -ltorch_python -lc10 \
	  -L$(BUILD)/lib -lweft -Wl,-rpath,$(abspath $(BUILD)/lib)

$(TORCH_OUT)/__init__.py: torch/weft_torch/__init__.py
	@mkdir -p $(@D)
	cp $< $@

# make test builds it where Debian's torch and its headers are installed
# (not under the sanitizers: python would load an instrumented libweft
# without their runtime).
ifeq ($(SAN),)
ifneq ($(wildcard /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp /usr/lib/python3/dist-packages/torch/__init__.py),)
TEST_DEPS += torch
endif
endif

# make test-torch2: tests/torch on Debian 13's PyTorch 2.6, in a Debian 13
# root made from Debian's packages and kept at DEBIAN13_ROOT
# (scripts/debian13-root.sh makes it when missing); libweft and the
# extension are built there, in build-debian13/. Needs root.
DEBIAN13_ROOT ?= /var/cache/weft/debian13-root
.PHONY: test-torch2
test-torch2:
	./scripts/debian13-root.sh $(DEBIAN13_ROOT) tests/torch/run.sh build-debian13

# make torch-suite / torch2-suite: PyTorch's own distributed suite
# (distributed_test.py) on gloo and on weft, compared test by test
# (tests/torch/suite/run.sh), on this machine's torch 1.13 or in the Debian
# 13 root's torch 2.6. About 20 minutes per backend; not part of make test.
# SUITE_WORLD sets the ranks (2 by default); SUITE_BACKENDS=weft runs weft
# alone against the gloo results already there.
SUITE_WORLD ?= 2
SUITE_BACKENDS ?= gloo weft
.PHONY: torch-suite torch2-suite
torch-suite:
	SUITE_BACKENDS="$(SUITE_BACKENDS)" tests/torch/suite/run.sh $(BUILD) $(SUITE_WORLD)
torch2-suite:
	./scripts/debian13-root.sh $(DEBIAN13_ROOT) env SUITE_BACKENDS="$(SUITE_BACKENDS)" \
	  tests/torch/suite/run.sh build-debian13 $(SUITE_WORLD)

# make torch2-compare: perf/compare/torch_run.sh (weft against gloo through
# torch.distributed) in the Debian 13 root's torch 2.6, weft built in
# build-debian13/; REPS repetitions (3 by default). Results in
# build/compare/torch-2.6.0/.
REPS ?= 3
.PHONY: torch2-compare
torch2-compare:
	./scripts/debian13-root.sh $(DEBIAN13_ROOT) perf/compare/torch_run.sh -B build-debian13 -r $(REPS)
