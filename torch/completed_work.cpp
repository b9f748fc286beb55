/*
 * completed_work.cpp — CompletedWork (completed_work.hpp).
 */
#include "completed_work.hpp"

#include <ATen/core/jit_type.h>

namespace weft_torch {

CompletedWork::CompletedWork(std::vector<at::Tensor> outputs)
    : outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
  future_->markCompleted(c10::IValue(outputs_));
}

bool CompletedWork::wait(std::chrono::milliseconds timeout) {
  (void)timeout;
  return true;
}

}  // namespace weft_torch
