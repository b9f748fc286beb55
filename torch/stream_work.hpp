/*
 * stream_work.hpp — the Work a weft call returns: the call is queued on the
 * process group's weft stream, and the Work completes when the stream
 * reaches the callback queued right after it (weftStreamAddCallback), so
 * Works complete in the order they were issued; or, when the call completed
 * before it returned (weft's eager start on an idle stream), at once. Its future (which DDP's
 * reducer and comm hooks wait on) then holds the output tensors, or the
 * failure; wait() raises that failure as RuntimeError.
 */
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

#include "torch_compat.hpp"

namespace weft_torch {

class StreamWork : public c10d::Work {
 public:
  // `keep` holds the buffers the queued calls read and write until they are
  // done; `finish` (may be empty) runs once they succeeded, before the Work
  // completes: it lands results from those buffers in the caller's tensors.
  // `on_wait_timeout` runs, with the message wait() then raises, when
  // wait(timeout) expires first.
  StreamWork(int rank, c10d::OpType type, std::string call, std::vector<at::Tensor> outputs,
             std::vector<at::Tensor> keep, std::function<void()> finish,
             std::function<void(const std::string& why)> on_wait_timeout);

  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // The stream is past this Work's calls: `failure` empty means they
  // succeeded. Called once, from the stream's worker.
  void complete(const std::string& failure);

  // A receive from any rank: `source` holds the sender once the Work
  // completes (weftRecvAny writes it); sourceRank() then returns it.
  void report_source(std::shared_ptr<const int> source) { source_ = std::move(source); }
  int sourceRank() const override;

  const std::string& call() const { return call_; }
  std::chrono::steady_clock::time_point queued() const { return queued_; }

 private:
  std::string call_;
  std::chrono::steady_clock::time_point queued_;
  std::atomic<bool> done_{false};  // completed_, readable without the lock (wait()'s poll)
  std::vector<at::Tensor> outputs_, keep_;
  std::function<void()> finish_;
  std::function<void(const std::string&)> on_wait_timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<const int> source_;
};

}  // namespace weft_torch
