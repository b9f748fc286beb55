# cuda.mk — the CUDA device backend (src/kernels/README.md).
#
# Where nvcc is found, src/kernels/*.cu become build/lib/libweft-cuda.so
# (sm_80, sm_90 and compute_90 PTX; shared libcudart), a module libweft
# dlopens, and tests/gpu/*.cu become programs tests/run.sh runs (they skip
# without a GPU). Without nvcc this prints one line and builds nothing here.
# Nothing else is ever compiled by nvcc. The functors' host test
# (tests/unit/test_cuda_ops) needs only the C++ compiler and is built everywhere.
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
NVCC := $(NVCC)
CUDA_LIB       := $(BUILD)/lib/libweft-cuda.so
CUDA_SRCS      := $(wildcard src/kernels/*.cu)
CUDA_HDRS      := $(wildcard src/kernels/*.h src/kernels/*.cuh) src/arith/reduce.h include/nccl.h
CUDA_GPU_SRCS  := $(wildcard tests/gpu/test_*.cu)
CUDA_GPU_BINS  := $(CUDA_GPU_SRCS:tests/gpu/%.cu=$(BUILD)/tests/gpu/%)
NVCC_GENCODE   := -gencode arch=compute_80,code=sm_80 -gencode 'arch=compute_90,code=[sm_90,compute_90]'
# IEEE float everywhere (no FMA contraction, denormals kept, exact division):
# results must match the host backend bit for bit.
NVCC_FLAGS     := -std=c++17 -O3 -g -fmad=false -ftz=false -prec-div=true -prec-sqrt=true \
                  -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra -Iinclude -Isrc/arith -Isrc/kernels
# The library objects the GPU tests and the stand-in kernels take their host reference from.
ARITH_REF_OBJS := $(addprefix $(BUILD)/obj/src/arith/,reduce.o reduce_int.o reduce_float.o reduce_simd.o \
                  reduce_small_avx2.o reduce_small_avx512.o dtype.o)

.PHONY: cuda
ifneq ($(NVCC),)
ALL += $(CUDA_LIB)
# Sanitizer builds (make test-asan) leave the GPU tests out: their host
# reference objects are instrumented and nvcc links without the runtime.
TEST_DEPS += $(if $(SAN),,$(CUDA_GPU_BINS))
cuda: $(CUDA_LIB) $(CUDA_GPU_BINS)
$(CUDA_LIB): $(CUDA_SRCS) $(CUDA_HDRS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) $(NVCC_GENCODE) -shared -cudart shared -o $@ $(CUDA_SRCS)
$(BUILD)/tests/gpu/%: tests/gpu/%.cu $(CUDA_LIB) $(CUDA_HDRS) $(ARITH_REF_OBJS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) $(NVCC_GENCODE) -cudart shared -o $@ $< $(ARITH_REF_OBJS) \
	  -L$(BUILD)/lib -lweft-cuda -Xlinker -rpath,$(abspath $(BUILD)/lib) -lm
else
ALL += cuda-skip-note
cuda: cuda-skip-note
.PHONY: cuda-skip-note
cuda-skip-note:
	@echo "weft: nvcc not found; skipping the CUDA backend (src/kernels/, tests/gpu/)"
endif

# Host C++ shim that runs the device functors on the CPU for the unit test.
CUDA_SHIM_OBJ := $(BUILD)/obj/tests/unit/cuda_ops_shim.o
$(CUDA_SHIM_OBJ): tests/unit/cuda_ops_shim.cpp | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -Wall -Wextra -Werror $(OPT) -g -fPIC $(SAN) -ffp-contract=off -fno-exceptions \
	  -fno-rtti -fno-threadsafe-statics -DWEFT_NO_CUDA -Iinclude -Isrc/arith -Isrc/kernels -MMD -MP -c $< -o $@
$(BUILD)/tests/unit/test_cuda_ops: $(CUDA_SHIM_OBJ)
-include $(CUDA_SHIM_OBJ:.o=.d)
