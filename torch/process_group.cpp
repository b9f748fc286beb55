/*
 * process_group.cpp — ProcessGroupWeft (process_group.hpp): rendezvous
 * through the Store, then every c10d collective as weft calls queued on the
 * group's stream. Lists of tensors (allgather's outputs, reduce_scatter's
 * inputs, alltoall's) go through one contiguous buffer, or through grouped
 * point-to-point calls where their sizes differ; what lands in the caller's
 * tensors afterwards runs on the stream's worker once the calls are done, or
 * on the caller's thread when they completed before returning.
 */
#include "process_group.hpp"

#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <c10/util/Exception.h>

#include "gil.hpp"
#include "tensor_map.hpp"

namespace weft_torch {

namespace {

const char kIdKey[] = "weft_unique_id";

// The group's unique id: made by rank 0, read from the store by the others.
ncclUniqueId rendezvous(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  ncclUniqueId id;
  if (rank == 0) {
    ncclResult_t res = ncclGetUniqueId(&id);
    TORCH_CHECK(res == ncclSuccess, "weft: ncclGetUniqueId failed: ", ncclGetErrorString(res));
    std::vector<uint8_t> bytes(reinterpret_cast<uint8_t *>(&id), reinterpret_cast<uint8_t *>(&id) + sizeof(id));
    store->set(kIdKey, bytes);
  } else {
    std::vector<uint8_t> bytes = store->get(kIdKey);
    TORCH_CHECK(bytes.size() == sizeof(id), "weft: the store holds a ", bytes.size(), "-byte unique id, not ",
                sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  return id;
}

// Block i of a flat buffer laid out as `parts` tensors of `like`'s shape.
at::Tensor block(const at::Tensor& flat, const at::Tensor& like, int i) {
  int64_t n = like.numel();
  return flat.narrow(0, i * n, n).view(like.sizes());
}

// dim-0 rows of `t` taken by each of `size` ranks: the split sizes, or equal parts.
std::vector<int64_t> rows_per_rank(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                                   const char *call) {
  if (!splits.empty()) {
    TORCH_CHECK(static_cast<int>(splits.size()) == size, "weft: ", call, ": ", splits.size(),
                " split sizes for ", size, " ranks");
    int64_t total = 0;
    for (int64_t s : splits) {
      TORCH_CHECK(s >= 0, "weft: ", call, ": a negative split size (", s, ")");
      total += s;
    }
    TORCH_CHECK(t.dim() > 0 && total == t.size(0), "weft: ", call, ": split sizes add up to ", total,
                " rows, the tensor has ", t.dim() > 0 ? t.size(0) : 0);
    return splits;
  }
  TORCH_CHECK(t.dim() > 0 && t.size(0) % size == 0, "weft: ", call, ": ", t.dim() > 0 ? t.size(0) : 0,
              " rows do not split evenly over ", size, " ranks");
  return std::vector<int64_t>(size, t.size(0) / size);
}

}  // namespace

namespace {

// What the stream's callback needs to complete a Work.
struct Pending {
  ProcessGroupWeft *group;
  c10::intrusive_ptr<StreamWork> work;
};

}  // namespace

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : WeftBackendBase(rank, size) {
  ncclUniqueId id = rendezvous(store, rank);
  check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
  ncclResult_t res = weftStreamCreate(&stream_);
  if (res != ncclSuccess) {
    ncclCommDestroy(comm_);
    comm_ = nullptr;
    check(res, "weftStreamCreate");
  }
  watchdog_ = std::make_unique<Watchdog>(timeout, [this, timeout](const std::string& call) {
    revoke("weft: " + call + " on rank " + std::to_string(getRank()) + " timed out after " +
           std::to_string(timeout.count()) + " ms (the process group's timeout); the communicator is revoked");
  });
}

ProcessGroupWeft::~ProcessGroupWeft() {
  // What is queued still runs, so every Work completes; the watchdog, alive
  // until the stream is gone, bounds that by the group's timeout. (Revoking
  // here would fail peers still finishing a call this rank has finished.)
  if (stream_ != nullptr) without_gil([this] { weftStreamDestroy(stream_); });
  watchdog_.reset();
  if (comm_ != nullptr) ncclCommDestroy(comm_);
}

// The RuntimeError text for `what` failing with `res`: why the communicator
// was revoked, if it was, else weft's error and its last message.
std::string ProcessGroupWeft::failure(const char *what, ncclResult_t res) {
  std::string why = std::string(what) + " failed on rank " + std::to_string(getRank()) + ": " + ncclGetErrorString(res);
  {
    std::lock_guard<std::mutex> hold(timeout_mu_);
    if (!timed_out_.empty()) return timed_out_ + " (" + why + ")";
  }
  const char *last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
  if (last != nullptr && last[0] != '\0') why += std::string(" (") + last + ")";
  return "weft: " + why;
}

void ProcessGroupWeft::check(ncclResult_t res, const char *what) {
  if (res != ncclSuccess) TORCH_CHECK(false, failure(what, res));
}

// Fails every call in flight and refuses new ones (once; the first reason stays).
void ProcessGroupWeft::revoke(const std::string& why) {
  {
    std::lock_guard<std::mutex> hold(timeout_mu_);
    if (!timed_out_.empty()) return;
    timed_out_ = why;
  }
  ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
}

void ProcessGroupWeft::on_stream_done(cudaStream_t stream, ncclResult_t status, void *arg) {
  (void)stream;
  std::unique_ptr<Pending> p(static_cast<Pending *>(arg));
  p->group->watchdog_->done();
  p->work->complete(status == ncclSuccess ? std::string() : p->group->failure(p->work->call().c_str(), status));
}

c10::intrusive_ptr<StreamWork> ProcessGroupWeft::launch(c10d::OpType type, const char *name,
                                                        std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
                                                        const Issue& issue, std::function<void()> finish, bool group) {
  auto work = c10::make_intrusive<StreamWork>(
      getRank(), type, name, std::move(outputs), std::move(keep), std::move(finish),
      [this](const std::string& why) { revoke(why); });
  std::lock_guard<std::mutex> hold(mu_);
  // A call queued on an idle stream starts on this thread (weft's eager
  // start) and often completes there. Each failure on the stream has reached
  // its Work already (through the callback after it), so an idle stream's
  // record of one is cleared here, and one found after the call is its own.
  bool idle = weftStreamQuery(stream_) != ncclInProgress;
  ncclResult_t res;
  if (group) {
    // ncclGroupEnd in every case, so a failure never leaves a group open.
    check(ncclGroupStart(), "ncclGroupStart");
    res = issue(stream_);
    ncclResult_t end = ncclGroupEnd();
    if (res == ncclSuccess) res = end;
  } else {
    res = issue(stream_);
  }
  check(res, name);
  if (idle && (res = weftStreamQuery(stream_)) != ncclInProgress) {  // done already: no callback to wait for
    work->complete(res == ncclSuccess ? std::string() : failure(name, res));
    return work;
  }
  watchdog_->watch(name);
  auto *pending = new Pending{this, work};
  res = weftStreamAddCallback(stream_, &ProcessGroupWeft::on_stream_done, pending);
  if (res != ncclSuccess) {  // no memory for the callback: finish here, in order
    delete pending;
    ncclResult_t ran = weftStreamSynchronize(stream_);
    watchdog_->done();
    work->complete(failure(name, ran != ncclSuccess ? ran : res));
  }
  return work;
}

// The one tensor of `tensors`, updated in place by `call` on a dense buffer
// (the tensor itself, or a copy landed back into it).
c10::intrusive_ptr<StreamWork> ProcessGroupWeft::in_place(
    std::vector<at::Tensor>& tensors, c10d::OpType type, const char *name,
    const std::function<ncclResult_t(at::Tensor&, cudaStream_t)>& call) {
  at::Tensor t = single(tensors, name);
  at::Tensor buf = dense(t);
  nccl_type(buf, name);
  return launch(type, name, tensors, {buf}, [&](cudaStream_t s) { return call(buf, s); },
                [t, buf]() mutable { land(t, buf); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  int root = static_cast<int>(opts.rootRank);
  return in_place(tensors, c10d::OpType::BROADCAST, "broadcast", [&](at::Tensor& b, cudaStream_t s) {
    return ncclBroadcast(b.data_ptr(), b.data_ptr(), b.numel(), nccl_type(b, "broadcast"), root, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  ncclRedOp_t op = nccl_op(opts.reduceOp, single(tensors, "allreduce").scalar_type(), "allreduce");
  return in_place(tensors, c10d::OpType::ALLREDUCE, "allreduce", [&](at::Tensor& b, cudaStream_t s) {
    return ncclAllReduce(b.data_ptr(), b.data_ptr(), b.numel(), nccl_type(b, "allreduce"), op, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<at::Tensor> bufs;
  for (auto& t : tensors) {
    check_cpu(t, "allreduce_coalesced");
    nccl_type(t, "allreduce_coalesced");  // checked before the group opens
    nccl_op(opts.reduceOp, t.scalar_type(), "allreduce_coalesced");
    bufs.push_back(dense(t));
  }
  auto issue = [&](cudaStream_t s) {
    ncclResult_t res = ncclSuccess;
    for (auto& b : bufs)
      if (res == ncclSuccess)
        res = ncclAllReduce(b.data_ptr(), b.data_ptr(), b.numel(), nccl_type(b, "allreduce_coalesced"),
                            nccl_op(opts.reduceOp, b.scalar_type(), "allreduce_coalesced"), comm_, s);
    return res;
  };
  auto outs = tensors;
  return launch(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, bufs, issue,
                [outs, bufs]() mutable {
                  for (size_t i = 0; i < outs.size(); i++) land(outs[i], bufs[i]);
                }, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  ncclRedOp_t op = nccl_op(opts.reduceOp, single(tensors, "reduce").scalar_type(), "reduce");
  int root = static_cast<int>(opts.rootRank);
  return in_place(tensors, c10d::OpType::REDUCE, "reduce", [&](at::Tensor& b, cudaStream_t s) {
    return ncclReduce(b.data_ptr(), b.data_ptr(), b.numel(), nccl_type(b, "reduce"), op, root, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  (void)opts;
  at::Tensor in = dense(single(inputs, "allgather"));
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "weft: allgather needs one output list of ", getSize(), " tensors");
  check_same(outputs[0], in, "allgather");
  at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
  auto outs = outputs[0];
  return launch(
      c10d::OpType::ALLGATHER, "allgather", outs, {in, flat},
      [&](cudaStream_t s) {
        return ncclAllGather(in.data_ptr(), flat.data_ptr(), in.numel(), nccl_type(in, "allgather"), comm_, s);
      },
      [outs, flat]() mutable {
        for (size_t i = 0; i < outs.size(); i++) outs[i].copy_(block(flat, outs[i], static_cast<int>(i)));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  (void)opts;
  check_cpu(input, "_allgather_base");
  check_cpu(output, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * getSize(),
              "weft: _allgather_base needs an output of ", getSize(), " x ", input.numel(), " elements of ",
              input.scalar_type(), " (got ", output.numel(), " of ", output.scalar_type(), ")");
  at::Tensor in = dense(input), out = dense(output), target = output;
  return launch(
      c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output}, {in, out},
      [&](cudaStream_t s) {
        return ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in, "_allgather_base"), comm_, s);
      },
      [target, out]() mutable { land(target, out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                     std::vector<at::Tensor>& inputs,
                                                                     const c10d::AllgatherOptions& opts) {
  (void)opts;
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "weft: allgather_coalesced needs ", getSize(),
              " output lists (got ", outputs.size(), ")");
  for (auto& o : outputs)
    TORCH_CHECK(o.size() == inputs.size(), "weft: allgather_coalesced: an output list of ", o.size(),
                " tensors for ", inputs.size(), " inputs");
  std::vector<at::Tensor> ins, flats;
  for (size_t j = 0; j < inputs.size(); j++) {
    check_cpu(inputs[j], "allgather_coalesced");
    nccl_type(inputs[j], "allgather_coalesced");  // checked before the group opens
    for (auto& o : outputs) check_same({o[j]}, inputs[j], "allgather_coalesced");
    ins.push_back(dense(inputs[j]));
    flats.push_back(at::empty({inputs[j].numel() * getSize()}, inputs[j].options()));
  }
  std::vector<at::Tensor> all, keep = ins;
  for (auto& o : outputs) all.insert(all.end(), o.begin(), o.end());
  keep.insert(keep.end(), flats.begin(), flats.end());
  auto outs = outputs;
  auto issue = [&](cudaStream_t s) {
    ncclResult_t res = ncclSuccess;
    for (size_t j = 0; j < ins.size() && res == ncclSuccess; j++)
      res = ncclAllGather(ins[j].data_ptr(), flats[j].data_ptr(), ins[j].numel(),
                          nccl_type(ins[j], "allgather_coalesced"), comm_, s);
    return res;
  };
  return launch(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", all, keep, issue,
                [outs, flats]() mutable {
                  for (size_t i = 0; i < outs.size(); i++)
                    for (size_t j = 0; j < flats.size(); j++)
                      outs[i][j].copy_(block(flats[j], outs[i][j], static_cast<int>(i)));
                }, true);
}

#if WEFT_TENSOR_COALESCED
// Several (input, output) pairs in one group, `call` on each pair's dense
// buffers: the outputs hold size x their input's elements (gathered), or
// the inputs size x their output's (scattered).
c10::intrusive_ptr<StreamWork> ProcessGroupWeft::coalesced_pairs(
    const char *name, std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, bool gathered,
    const std::function<ncclResult_t(at::Tensor& in, at::Tensor& out, cudaStream_t)>& call) {
  TORCH_CHECK(outputs.size() == inputs.size(), "weft: ", name, ": ", outputs.size(), " outputs for ", inputs.size(),
              " inputs");
  std::vector<at::Tensor> ins, outs;
  for (size_t j = 0; j < inputs.size(); j++) {
    check_cpu(inputs[j], name);
    check_cpu(outputs[j], name);
    nccl_type(inputs[j], name);  // checked before the group opens
    const at::Tensor& small = gathered ? inputs[j] : outputs[j];
    const at::Tensor& large = gathered ? outputs[j] : inputs[j];
    TORCH_CHECK(outputs[j].scalar_type() == inputs[j].scalar_type() && large.numel() == small.numel() * getSize(),
                "weft: ", name, " needs ", gathered ? "outputs of " : "inputs of ", getSize(), " x their ",
                gathered ? "input's" : "output's", " elements, of its type");
    ins.push_back(dense(inputs[j]));
    outs.push_back(dense(outputs[j]));
  }
  std::vector<at::Tensor> keep = ins;
  keep.insert(keep.end(), outs.begin(), outs.end());
  auto issue = [&](cudaStream_t s) {
    ncclResult_t res = ncclSuccess;
    for (size_t j = 0; j < ins.size() && res == ncclSuccess; j++) res = call(ins[j], outs[j], s);
    return res;
  };
  auto targets = outputs;
  return launch(c10d::OpType::COALESCED, name, outputs, keep, issue,
                [targets, outs]() mutable {
                  for (size_t j = 0; j < targets.size(); j++) land(targets[j], outs[j]);
                }, true);
}

// _allgather_base and _reduce_scatter_base on several tensor pairs at once,
// in one group (torch's functional collectives call these with one pair).
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                 std::vector<at::Tensor>& inputs,
                                                                                 const c10d::AllgatherOptions& opts) {
  (void)opts;
  const char *name = "allgather_into_tensor_coalesced";
  return coalesced_pairs(name, outputs, inputs, true, [&](at::Tensor& in, at::Tensor& out, cudaStream_t s) {
    return ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in, name), comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  const char *name = "reduce_scatter_tensor_coalesced";
  for (auto& t : inputs) nccl_op(opts.reduceOp, t.scalar_type(), name);  // checked before the group opens
  return coalesced_pairs(name, outputs, inputs, false, [&](at::Tensor& in, at::Tensor& out, cudaStream_t s) {
    return ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_type(out, name),
                             nccl_op(opts.reduceOp, out.scalar_type(), name), comm_, s);
  });
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  at::Tensor in = dense(single(inputs, "gather"));
  int root = static_cast<int>(opts.rootRank);
  bool is_root = getRank() == root;
  if (is_root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "weft: gather needs one output list of ", getSize(), " tensors on the root");
    check_same(outputs[0], in, "gather");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "weft: gather takes output tensors only on the root");
  }
  at::Tensor flat = is_root ? at::empty({in.numel() * getSize()}, in.options()) : at::Tensor();
  std::vector<at::Tensor> outs = is_root ? outputs[0] : std::vector<at::Tensor>();
  return launch(
      c10d::OpType::GATHER, "gather", outs, is_root ? std::vector<at::Tensor>{in, flat} : std::vector<at::Tensor>{in},
      [&](cudaStream_t s) {
        return ncclGather(in.data_ptr(), is_root ? flat.data_ptr() : nullptr, in.numel(), nccl_type(in, "gather"),
                          root, comm_, s);
      },
      [outs, flat]() mutable {
        for (size_t i = 0; i < outs.size(); i++) outs[i].copy_(block(flat, outs[i], static_cast<int>(i)));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  at::Tensor out = single(outputs, "scatter");
  int root = static_cast<int>(opts.rootRank);
  bool is_root = getRank() == root;
  at::Tensor flat;
  if (is_root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "weft: scatter needs one input list of ", getSize(), " tensors on the root");
    check_same(inputs[0], out, "scatter");
    std::vector<at::Tensor> flat_parts;
    for (auto& t : inputs[0]) flat_parts.push_back(t.reshape({-1}));
    flat = at::cat(flat_parts);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "weft: scatter takes input tensors only on the root");
  }
  at::Tensor buf = dense(out);
  std::vector<at::Tensor> keep{buf};
  if (is_root) keep.push_back(flat);
  return launch(
      c10d::OpType::SCATTER, "scatter", outputs, keep,
      [&](cudaStream_t s) {
        return ncclScatter(is_root ? flat.data_ptr() : nullptr, buf.data_ptr(), buf.numel(),
                           nccl_type(buf, "scatter"), root, comm_, s);
      },
      [out, buf]() mutable { land(out, buf); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "weft: reduce_scatter needs one input list of ", getSize(), " tensors");
  check_same(inputs[0], out, "reduce_scatter");
  ncclRedOp_t op = nccl_op(opts.reduceOp, out.scalar_type(), "reduce_scatter");
  std::vector<at::Tensor> flat_parts;
  for (auto& t : inputs[0]) flat_parts.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts), buf = dense(out);
  return launch(
      c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs, {flat, buf},
      [&](cudaStream_t s) {
        return ncclReduceScatter(flat.data_ptr(), buf.data_ptr(), buf.numel(), nccl_type(buf, "reduce_scatter"), op,
                                 comm_, s);
      },
      [out, buf]() mutable { land(out, buf); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  check_cpu(input, "_reduce_scatter_base");
  check_cpu(output, "_reduce_scatter_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * getSize(),
              "weft: _reduce_scatter_base needs an input of ", getSize(), " x ", output.numel(), " elements of ",
              output.scalar_type(), " (got ", input.numel(), " of ", input.scalar_type(), ")");
  ncclRedOp_t op = nccl_op(opts.reduceOp, output.scalar_type(), "_reduce_scatter_base");
  at::Tensor in = dense(input), out = dense(output), target = output;
  return launch(
      c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output}, {in, out},
      [&](cudaStream_t s) {
        return ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_type(out, "_reduce_scatter_base"),
                                 op, comm_, s);
      },
      [target, out]() mutable { land(target, out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  (void)opts;
  check_cpu(input, "alltoall_base");
  check_cpu(output, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "weft: alltoall_base: input ", input.scalar_type(),
              ", output ", output.scalar_type());
  at::Tensor in = dense(input), out = dense(output), target = output;
  ncclDataType_t type = nccl_type(in, "alltoall_base");
  auto finish = [target, out]() mutable { land(target, out); };
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    TORCH_CHECK(in.numel() == out.numel() && in.numel() % getSize() == 0, "weft: alltoall_base: ", in.numel(),
                " input and ", out.numel(), " output elements do not split evenly over ", getSize(), " ranks");
    return launch(
        c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, {in, out},
        [&](cudaStream_t s) { return ncclAlltoAll(in.data_ptr(), out.data_ptr(), in.numel() / getSize(), type, comm_, s); },
        finish);
  }
  std::vector<int64_t> in_rows = rows_per_rank(in, input_split_sizes, getSize(), "alltoall_base");
  std::vector<int64_t> out_rows = rows_per_rank(out, output_split_sizes, getSize(), "alltoall_base");
  int64_t in_row = in.size(0) > 0 ? in.numel() / in.size(0) : 0, out_row = out.size(0) > 0 ? out.numel() / out.size(0) : 0;
  TORCH_CHECK(in_row == out_row || in.size(0) == 0 || out.size(0) == 0, "weft: alltoall_base: input rows of ", in_row,
              " and output rows of ", out_row, " elements");
  size_t elem = in.element_size();
  char *src = static_cast<char *>(in.data_ptr()), *dst = static_cast<char *>(out.data_ptr());
  auto issue = [&](cudaStream_t s) {
    ncclResult_t res = ncclSuccess;
    int64_t in_off = 0, out_off = 0;
    for (int p = 0; p < getSize() && res == ncclSuccess; p++) {
      res = ncclSend(src + in_off * in_row * elem, in_rows[p] * in_row, type, p, comm_, s);
      if (res == ncclSuccess) res = ncclRecv(dst + out_off * out_row * elem, out_rows[p] * out_row, type, p, comm_, s);
      in_off += in_rows[p];
      out_off += out_rows[p];
    }
    return res;
  };
  return launch(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, {in, out}, issue, finish, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  (void)opts;
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize() && static_cast<int>(inputs.size()) == getSize(),
              "weft: alltoall needs ", getSize(), " input and output tensors (got ", inputs.size(), " and ",
              outputs.size(), ")");
  std::vector<at::Tensor> ins, outs;
  for (int p = 0; p < getSize(); p++) {
    check_cpu(inputs[p], "alltoall");
    check_cpu(outputs[p], "alltoall");
    TORCH_CHECK(inputs[p].scalar_type() == inputs[0].scalar_type() && outputs[p].scalar_type() == inputs[0].scalar_type(),
                "weft: alltoall: tensors of different dtypes in one call");
    ins.push_back(dense(inputs[p]));
    outs.push_back(dense(outputs[p]));
  }
  ncclDataType_t type = nccl_type(inputs[0], "alltoall");
  std::vector<at::Tensor> keep = ins, targets = outputs;
  keep.insert(keep.end(), outs.begin(), outs.end());
  auto issue = [&](cudaStream_t s) {
    ncclResult_t res = ncclSuccess;
    for (int p = 0; p < getSize() && res == ncclSuccess; p++) {
      res = ncclSend(ins[p].data_ptr(), ins[p].numel(), type, p, comm_, s);
      if (res == ncclSuccess) res = ncclRecv(outs[p].data_ptr(), outs[p].numel(), type, p, comm_, s);
    }
    return res;
  };
  return launch(c10d::OpType::ALLTOALL, "alltoall", outputs, keep, issue,
                [targets, outs]() mutable {
                  for (size_t p = 0; p < targets.size(); p++) land(targets[p], outs[p]);
                }, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  (void)tag;  // weft, as NCCL, matches point-to-point calls by order between a pair of ranks
  at::Tensor buf = dense(single(tensors, "send"));
  return launch(c10d::OpType::SEND, "send", tensors, {buf}, [&](cudaStream_t s) {
    return ncclSend(buf.data_ptr(), buf.numel(), nccl_type(buf, "send"), dst_rank, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  (void)tag;
  return in_place(tensors, c10d::OpType::RECV, "recv", [&](at::Tensor& b, cudaStream_t s) {
    return ncclRecv(b.data_ptr(), b.numel(), nccl_type(b, "recv"), src_rank, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  (void)tag;  // as for recv: the next message this receive is owed, from whichever rank it comes
  auto source = std::make_shared<int>(-1);  // written by weft when the receive completes
  auto work = in_place(tensors, c10d::OpType::RECVANYSOURCE, "recvAnysource", [&](at::Tensor& b, cudaStream_t s) {
    return weftRecvAny(b.data_ptr(), b.numel(), nccl_type(b, "recvAnysource"), source.get(), comm_, s);
  });
  work->report_source(std::move(source));
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::barrier(const c10d::BarrierOptions& opts) {
  (void)opts;
  at::Tensor one = at::ones({1}, at::kInt);
  return launch(c10d::OpType::BARRIER, "barrier", {}, {one}, [&](cudaStream_t s) {
    return ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclInt32, ncclSum, comm_, s);
  });
}

}  // namespace weft_torch
