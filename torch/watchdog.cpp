/*
 * watchdog.cpp — Watchdog (watchdog.hpp). A completed call does not wake
 * the thread (that would cost a wake-up per call): it sleeps to the oldest
 * call's deadline and then looks again, so it wakes at most once per
 * timeout while calls keep completing.
 */
#include "watchdog.hpp"

namespace weft_torch {

Watchdog::Watchdog(std::chrono::milliseconds timeout, std::function<void(const std::string&)> expire)
    : timeout_(timeout), expire_(std::move(expire)) {
  if (timeout_.count() > 0) thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> hold(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::watch(const std::string& call) {
  if (timeout_.count() <= 0) return;
  std::lock_guard<std::mutex> hold(mu_);
  bool was_empty = in_flight_.empty();
  in_flight_.push_back({next_seq_++, std::chrono::steady_clock::now(), call});
  if (was_empty) cv_.notify_all();  // the thread may sleep with nothing to watch
}

void Watchdog::done() {
  if (timeout_.count() <= 0) return;
  std::lock_guard<std::mutex> hold(mu_);
  if (!in_flight_.empty()) in_flight_.pop_front();
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (in_flight_.empty() || expired_) {
      cv_.wait(lock);
      continue;
    }
    uint64_t oldest = in_flight_.front().seq;
    auto deadline = in_flight_.front().queued + timeout_;
    cv_.wait_until(lock, deadline, [&] { return stop_; });
    if (stop_ || in_flight_.empty() || in_flight_.front().seq != oldest) continue;
    expired_ = true;  // once: the communicator is revoked, everything after fails too
    std::string call = in_flight_.front().call;
    lock.unlock();
    expire_(call);
    lock.lock();
  }
}

}  // namespace weft_torch
