/*
 * tensor_map.hpp — how torch's tensors, dtypes and reduce ops map onto
 * weft's NCCL types, and the checks every call makes on its tensors.
 *
 * A request weft cannot serve (a CUDA or sparse tensor, a dtype NCCL has no
 * type for, a bitwise op) raises RuntimeError naming what was asked, before
 * anything is sent, so no rank is left waiting on a call another skipped.
 */
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nccl.h>

#include "torch_compat.hpp"

namespace weft_torch {

// NCCL's type for a tensor's dtype (bool travels as uint8).
ncclDataType_t nccl_type(const at::Tensor& t, const char *call);

// NCCL's op for torch's, on this dtype (on bool SUM is OR, so MAX; PRODUCT is AND, so MIN).
ncclRedOp_t nccl_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char *call);

// A dense CPU tensor, or RuntimeError.
void check_cpu(const at::Tensor& t, const char *call);

// Exactly one tensor in the list (torch passes one per device).
const at::Tensor& single(const std::vector<at::Tensor>& ts, const char *call);

// Every tensor of the list has the dtype and element count of `like`.
void check_same(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char *call);

// A contiguous tensor to hand to weft: the tensor itself, or a copy.
at::Tensor dense(const at::Tensor& t);

// After weft wrote into `buf` (from dense(t)), the result lands in t.
void land(at::Tensor& t, const at::Tensor& buf);

}  // namespace weft_torch
