/*
 * tensor_map.cpp — dtype and op mapping, tensor checks (tensor_map.hpp).
 */
#include "tensor_map.hpp"

#include <c10/util/Exception.h>

namespace weft_torch {

ncclDataType_t nccl_type(const at::Tensor& t, const char *call) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    default:
      TORCH_CHECK(false, "weft: ", call, " does not support dtype ", t.scalar_type(),
                  " (float32/64, float16, bfloat16, int8, uint8, int32, int64 and bool are)");
  }
}

ncclRedOp_t nccl_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char *call) {
  bool is_bool = dtype == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return is_bool ? ncclMax : ncclSum;
    case c10d::ReduceOp::PRODUCT: return is_bool ? ncclMin : ncclProd;
    case c10d::ReduceOp::MIN: return ncclMin;
    case c10d::ReduceOp::MAX: return ncclMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!is_bool, "weft: ", call, " with ReduceOp.AVG does not apply to bool tensors");
      return ncclAvg;
    default:
      TORCH_CHECK(false, "weft: ", call, " does not support this ReduceOp (", static_cast<int>(op.op_),
                  "); SUM, PRODUCT, MIN, MAX and AVG are supported");
  }
}

void check_cpu(const at::Tensor& t, const char *call) {
  TORCH_CHECK(t.device().is_cpu(), "weft: ", call, " takes CPU tensors (got one on ", t.device(),
              "); on GPUs load weft as libnccl.so.2 under the nccl backend");
  TORCH_CHECK(t.layout() == at::kStrided, "weft: ", call, " takes dense tensors (got layout ", t.layout(), ")");
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char *call) {
  TORCH_CHECK(ts.size() == 1, "weft: ", call, " takes one tensor per call (got ", ts.size(), ")");
  check_cpu(ts[0], call);
  return ts[0];
}

void check_same(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char *call) {
  for (const auto& t : ts) {
    check_cpu(t, call);
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "weft: ", call, ": tensors of dtype ", t.scalar_type(),
                " and ", like.scalar_type(), " in one call");
    TORCH_CHECK(t.numel() == like.numel(), "weft: ", call, ": tensors of ", t.numel(), " and ", like.numel(),
                " elements in one call");
  }
}

at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

void land(at::Tensor& t, const at::Tensor& buf) {
  if (!buf.is_same(t)) t.copy_(buf);
}

}  // namespace weft_torch
