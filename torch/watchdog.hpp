/*
 * watchdog.hpp — the process group's timeout, as ProcessGroupNCCL's
 * watchdog applies it: a thread that sleeps until the oldest call in flight
 * has been queued for longer than the timeout, and then calls `expire` with
 * its name, once (the process group revokes its communicator there, so
 * every call in flight fails and no rank waits forever on a peer that
 * stopped calling). Calls complete in order, so only the oldest needs
 * watching; the watchdog holds no tensors.
 */
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace weft_torch {

class Watchdog {
 public:
  // timeout <= 0: never expire.
  Watchdog(std::chrono::milliseconds timeout, std::function<void(const std::string& call)> expire);
  ~Watchdog();

  void watch(const std::string& call);  // a call was just queued
  void done();                          // the oldest watched call completed

 private:
  struct Entry {
    uint64_t seq;
    std::chrono::steady_clock::time_point queued;
    std::string call;
  };
  void run();
  std::chrono::milliseconds timeout_;
  std::function<void(const std::string&)> expire_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> in_flight_;
  uint64_t next_seq_ = 0;
  bool stop_ = false, expired_ = false;
  std::thread thread_;
};

}  // namespace weft_torch
