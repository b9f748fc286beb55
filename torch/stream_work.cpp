/*
 * stream_work.cpp — StreamWork (stream_work.hpp).
 */
#include "stream_work.hpp"

#include <ATen/core/jit_type.h>
#include <mutex>
#include <thread>

#include <c10/util/Exception.h>

namespace weft_torch {

constexpr std::chrono::microseconds kPollBeforeSleep(50);

StreamWork::StreamWork(int rank, c10d::OpType type, std::string call, std::vector<at::Tensor> outputs,
                       std::vector<at::Tensor> keep, std::function<void()> finish,
                       std::function<void(const std::string&)> on_wait_timeout)
    : c10d::Work(rank, type),
      call_(std::move(call)),
      queued_(std::chrono::steady_clock::now()),
      outputs_(std::move(outputs)),
      keep_(std::move(keep)),
      finish_(std::move(finish)),
      on_wait_timeout_(std::move(on_wait_timeout)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())) {}

void StreamWork::complete(const std::string& failure) {
  std::exception_ptr error;
  if (failure.empty() && finish_) {
    try {
      finish_();
    } catch (...) {
      error = std::current_exception();
    }
  } else if (!failure.empty()) {
    error = std::make_exception_ptr(std::runtime_error(failure));
  }
  keep_.clear();
  finish_ = nullptr;
  finish(error);  // c10d::Work: completed_, exception_, and wake wait()ers
  done_.store(true, std::memory_order_release);
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

bool StreamWork::wait(std::chrono::milliseconds timeout) {
  // A short call completes within microseconds: poll (yielding the core to
  // the stream's worker) before sleeping, as a wake-up costs tens of µs.
  auto poll_until = std::chrono::steady_clock::now() + kPollBeforeSleep;
  while (!done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < poll_until)
    std::this_thread::yield();
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    // The process group's watchdog bounds this wait: past its timeout it
    // revokes the communicator, and the calls fail.
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    lock.unlock();
    std::string why = "weft: " + call_ + " on rank " + std::to_string(rank_) +
                      " did not complete within wait()'s timeout of " + std::to_string(timeout.count()) +
                      " ms; the communicator is revoked";
    if (on_wait_timeout_) on_wait_timeout_(why);
    TORCH_CHECK(false, why);
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

int StreamWork::sourceRank() const {
  if (source_ == nullptr) return c10d::Work::sourceRank();  // not a receive from any rank: torch's refusal
  std::lock_guard<std::mutex> hold(mutex_);  // completed_: what wait() returned on
  TORCH_CHECK(completed_, "weft: ", call_, "'s source rank is known once it completed");
  return *source_;
}

}  // namespace weft_torch
