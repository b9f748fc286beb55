/*
 * process_group.hpp — ProcessGroupWeft: torch.distributed's collectives on
 * CPU tensors through weft's NCCL API.
 *
 * One weft communicator per process group, created from the c10d::Store that
 * torch hands the backend (rank 0 makes the ncclUniqueId and publishes it,
 * as ProcessGroupNCCL does). Every call is queued on the group's weft
 * stream and returns at once with a StreamWork, which completes when the
 * stream has run it; calls from several threads (DDP's reducer runs in
 * autograd's) queue in turn. A request weft cannot serve raises
 * RuntimeError at the call; a failure while running (a dead peer, shapes
 * that differ between ranks) raises from wait() and fails the future. The
 * group's timeout is enforced by a Watchdog that revokes the communicator.
 */
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nccl.h>
#include <weft.h>

#include "stream_work.hpp"
#include "torch_compat.hpp"
#include "watchdog.hpp"

namespace weft_torch {

class ProcessGroupWeft : public WeftBackendBase {
 public:
  ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupWeft() override;

  const std::string getBackendName() const override { return "weft"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
#if WEFT_TENSOR_COALESCED
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  using Issue = std::function<ncclResult_t(cudaStream_t)>;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::mutex mu_;  // one thread queues at a time: a weft communicator serves one thread at a time
  std::mutex timeout_mu_;
  std::string timed_out_;  // set once the watchdog or a wait() timed out: why the calls fail
  std::unique_ptr<Watchdog> watchdog_;
  void check(ncclResult_t res, const char *what);
  std::string failure(const char *what, ncclResult_t res);
  void revoke(const std::string& why);
  static void on_stream_done(cudaStream_t stream, ncclResult_t status, void *arg);
  // Queues `issue`'s calls on the stream (in a group when `group`), then the
  // callback that completes the returned Work (see StreamWork).
  c10::intrusive_ptr<StreamWork> launch(c10d::OpType type, const char *name, std::vector<at::Tensor> outputs,
                                        std::vector<at::Tensor> keep, const Issue& issue,
                                        std::function<void()> finish = nullptr, bool group = false);
#if WEFT_TENSOR_COALESCED
  c10::intrusive_ptr<StreamWork> coalesced_pairs(
      const char *name, std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, bool gathered,
      const std::function<ncclResult_t(at::Tensor& in, at::Tensor& out, cudaStream_t)>& call);
#endif
  c10::intrusive_ptr<StreamWork> in_place(std::vector<at::Tensor>& tensors, c10d::OpType type, const char *name,
                                          const std::function<ncclResult_t(at::Tensor&, cudaStream_t)>& call);
};

}  // namespace weft_torch
