/*
 * completed_work.hpp — the Work a weft call returns: the call ran on the
 * caller's thread and has finished (or raised) by the time it returns, so
 * the Work is complete at birth and its future (which DDP's reducer and
 * comm hooks wait on) already holds the output tensors.
 */
#pragma once

#include <vector>

#include <ATen/core/ivalue.h>

#include "torch_compat.hpp"

namespace weft_torch {

class CompletedWork : public c10d::Work {
 public:
  explicit CompletedWork(std::vector<at::Tensor> outputs);

  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

inline c10::intrusive_ptr<c10d::Work> completed_work(std::vector<at::Tensor> outputs) {
  return c10::make_intrusive<CompletedWork>(std::move(outputs));
}

}  // namespace weft_torch
