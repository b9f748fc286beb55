/*
 * process_group.cpp — ProcessGroupWeft (process_group.hpp): rendezvous
 * through the Store, then every c10d collective as weft calls on the NULL
 * stream. Lists of tensors (allgather's outputs, reduce_scatter's inputs,
 * alltoall's) go through one contiguous buffer, or through grouped
 * point-to-point calls where their sizes differ.
 */
#include "process_group.hpp"

#include <cstring>
#include <functional>
#include <mutex>

#include <c10/util/Exception.h>

#include "completed_work.hpp"
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

// ncclGroupStart, the calls `body` makes (its first failure returned), and
// ncclGroupEnd in every case, so a failure never leaves a group open.
void ProcessGroupWeft::grouped(const char *what, const std::function<ncclResult_t()>& body) const {
  check(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t res = body();
  ncclResult_t end = ncclGroupEnd();
  check(res != ncclSuccess ? res : end, what);
}

// The one tensor of `tensors`, updated in place by `call` on a dense buffer
// (the tensor itself, or a copy landed back into it).
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::in_place(std::vector<at::Tensor>& tensors, const char *name,
                                                          const std::function<ncclResult_t(at::Tensor&)>& call) {
  at::Tensor t = single(tensors, name);
  at::Tensor buf = dense(t);
  nccl_type(buf, name);
  check(call(buf), name);
  land(t, buf);
  return completed_work(tensors);
}

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : WeftBackendBase(rank, size) {
  (void)timeout;  // weft bounds its own waits (WEFT_TIMEOUT) and fails dead peers itself
  ncclUniqueId id = rendezvous(store, rank);
  check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
}

ProcessGroupWeft::~ProcessGroupWeft() {
  if (comm_ != nullptr) ncclCommDestroy(comm_);
}

void ProcessGroupWeft::check(ncclResult_t res, const char *what) const {
  if (res == ncclSuccess) return;
  const char *last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
  TORCH_CHECK(false, "weft: ", what, " failed on rank ", getRank(), ": ", ncclGetErrorString(res),
              last != nullptr && last[0] != '\0' ? std::string(" (") + last + ")" : std::string());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  return in_place(tensors, "broadcast", [&](at::Tensor& b) {
    return ncclBroadcast(b.data_ptr(), b.data_ptr(), b.numel(), nccl_type(b, "broadcast"),
                         static_cast<int>(opts.rootRank), comm_, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  ncclRedOp_t op = nccl_op(opts.reduceOp, single(tensors, "allreduce").scalar_type(), "allreduce");
  return in_place(tensors, "allreduce", [&](at::Tensor& b) {
    return ncclAllReduce(b.data_ptr(), b.data_ptr(), b.numel(), nccl_type(b, "allreduce"), op, comm_, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  std::vector<at::Tensor> bufs;
  for (auto& t : tensors) {
    check_cpu(t, "allreduce_coalesced");
    nccl_type(t, "allreduce_coalesced");  // checked before the group opens
    nccl_op(opts.reduceOp, t.scalar_type(), "allreduce_coalesced");
    bufs.push_back(dense(t));
  }
  grouped("ncclAllReduce", [&] {
    ncclResult_t res = ncclSuccess;
    for (auto& b : bufs)
      if (res == ncclSuccess)
        res = ncclAllReduce(b.data_ptr(), b.data_ptr(), b.numel(), nccl_type(b, "allreduce_coalesced"),
                            nccl_op(opts.reduceOp, b.scalar_type(), "allreduce_coalesced"), comm_, nullptr);
    return res;
  });
  for (size_t i = 0; i < tensors.size(); i++) land(tensors[i], bufs[i]);
  return completed_work(tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  ncclRedOp_t op = nccl_op(opts.reduceOp, single(tensors, "reduce").scalar_type(), "reduce");
  return in_place(tensors, "reduce", [&](at::Tensor& b) {
    return ncclReduce(b.data_ptr(), b.data_ptr(), b.numel(), nccl_type(b, "reduce"), op,
                      static_cast<int>(opts.rootRank), comm_, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  (void)opts;
  at::Tensor in = dense(single(inputs, "allgather"));
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "weft: allgather needs one output list of ", getSize(), " tensors");
  check_same(outputs[0], in, "allgather");
  at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
  check(ncclAllGather(in.data_ptr(), flat.data_ptr(), in.numel(), nccl_type(in, "allgather"), comm_, nullptr),
        "ncclAllGather");
  for (int i = 0; i < getSize(); i++) outputs[0][i].copy_(block(flat, outputs[0][i], i));
  return completed_work(outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  (void)opts;
  check_cpu(input, "_allgather_base");
  check_cpu(output, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * getSize(),
              "weft: _allgather_base needs an output of ", getSize(), " x ", input.numel(), " elements of ",
              input.scalar_type(), " (got ", output.numel(), " of ", output.scalar_type(), ")");
  at::Tensor in = dense(input), out = dense(output);
  check(ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in, "_allgather_base"), comm_, nullptr),
        "ncclAllGather");
  land(output, out);
  return completed_work({output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                     std::vector<at::Tensor>& inputs,
                                                                     const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  (void)opts;
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "weft: allgather_coalesced needs ", getSize(),
              " output lists (got ", outputs.size(), ")");
  std::vector<at::Tensor> ins, flats;
  for (auto& o : outputs) {
    TORCH_CHECK(o.size() == inputs.size(), "weft: allgather_coalesced: an output list of ", o.size(),
                " tensors for ", inputs.size(), " inputs");
  }
  for (size_t j = 0; j < inputs.size(); j++) {
    check_cpu(inputs[j], "allgather_coalesced");
    nccl_type(inputs[j], "allgather_coalesced");  // checked before the group opens
    for (auto& o : outputs) check_same({o[j]}, inputs[j], "allgather_coalesced");
    ins.push_back(dense(inputs[j]));
    flats.push_back(at::empty({inputs[j].numel() * getSize()}, inputs[j].options()));
  }
  grouped("ncclAllGather", [&] {
    ncclResult_t res = ncclSuccess;
    for (size_t j = 0; j < ins.size() && res == ncclSuccess; j++)
      res = ncclAllGather(ins[j].data_ptr(), flats[j].data_ptr(), ins[j].numel(),
                          nccl_type(ins[j], "allgather_coalesced"), comm_, nullptr);
    return res;
  });
  std::vector<at::Tensor> all;
  for (int i = 0; i < getSize(); i++)
    for (size_t j = 0; j < ins.size(); j++) {
      outputs[i][j].copy_(block(flats[j], outputs[i][j], i));
      all.push_back(outputs[i][j]);
    }
  return completed_work(all);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
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
  check(ncclGather(in.data_ptr(), is_root ? flat.data_ptr() : nullptr, in.numel(), nccl_type(in, "gather"), root,
                   comm_, nullptr),
        "ncclGather");
  if (!is_root) return completed_work({});
  for (int i = 0; i < getSize(); i++) outputs[0][i].copy_(block(flat, outputs[0][i], i));
  return completed_work(outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
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
  check(ncclScatter(is_root ? flat.data_ptr() : nullptr, buf.data_ptr(), buf.numel(), nccl_type(buf, "scatter"), root,
                    comm_, nullptr),
        "ncclScatter");
  land(out, buf);
  return completed_work(outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  at::Tensor out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "weft: reduce_scatter needs one input list of ", getSize(), " tensors");
  check_same(inputs[0], out, "reduce_scatter");
  std::vector<at::Tensor> flat_parts;
  for (auto& t : inputs[0]) flat_parts.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts), buf = dense(out);
  check(ncclReduceScatter(flat.data_ptr(), buf.data_ptr(), buf.numel(), nccl_type(buf, "reduce_scatter"),
                          nccl_op(opts.reduceOp, buf.scalar_type(), "reduce_scatter"), comm_, nullptr),
        "ncclReduceScatter");
  land(out, buf);
  return completed_work(outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  check_cpu(input, "_reduce_scatter_base");
  check_cpu(output, "_reduce_scatter_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * getSize(),
              "weft: _reduce_scatter_base needs an input of ", getSize(), " x ", output.numel(), " elements of ",
              output.scalar_type(), " (got ", input.numel(), " of ", input.scalar_type(), ")");
  at::Tensor in = dense(input), out = dense(output);
  check(ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_type(out, "_reduce_scatter_base"),
                          nccl_op(opts.reduceOp, out.scalar_type(), "_reduce_scatter_base"), comm_, nullptr),
        "ncclReduceScatter");
  land(output, out);
  return completed_work({output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  (void)opts;
  check_cpu(input, "alltoall_base");
  check_cpu(output, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "weft: alltoall_base: input ", input.scalar_type(),
              ", output ", output.scalar_type());
  at::Tensor in = dense(input), out = dense(output);
  ncclDataType_t type = nccl_type(in, "alltoall_base");
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    TORCH_CHECK(in.numel() == out.numel() && in.numel() % getSize() == 0, "weft: alltoall_base: ", in.numel(),
                " input and ", out.numel(), " output elements do not split evenly over ", getSize(), " ranks");
    check(ncclAlltoAll(in.data_ptr(), out.data_ptr(), in.numel() / getSize(), type, comm_, nullptr), "ncclAlltoAll");
  } else {
    std::vector<int64_t> in_rows = rows_per_rank(in, input_split_sizes, getSize(), "alltoall_base");
    std::vector<int64_t> out_rows = rows_per_rank(out, output_split_sizes, getSize(), "alltoall_base");
    int64_t in_row = in.size(0) > 0 ? in.numel() / in.size(0) : 0, out_row = out.size(0) > 0 ? out.numel() / out.size(0) : 0;
    TORCH_CHECK(in_row == out_row || in.size(0) == 0 || out.size(0) == 0,
                "weft: alltoall_base: input rows of ", in_row, " and output rows of ", out_row, " elements");
    size_t elem = in.element_size();
    char *src = static_cast<char *>(in.data_ptr()), *dst = static_cast<char *>(out.data_ptr());
    grouped("alltoall_base", [&] {
      ncclResult_t res = ncclSuccess;
      int64_t in_off = 0, out_off = 0;
      for (int p = 0; p < getSize() && res == ncclSuccess; p++) {
        res = ncclSend(src + in_off * in_row * elem, in_rows[p] * in_row, type, p, comm_, nullptr);
        if (res == ncclSuccess)
          res = ncclRecv(dst + out_off * out_row * elem, out_rows[p] * out_row, type, p, comm_, nullptr);
        in_off += in_rows[p];
        out_off += out_rows[p];
      }
      return res;
    });
  }
  land(output, out);
  return completed_work({output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
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
  grouped("alltoall", [&] {
    ncclResult_t res = ncclSuccess;
    for (int p = 0; p < getSize() && res == ncclSuccess; p++) {
      res = ncclSend(ins[p].data_ptr(), ins[p].numel(), type, p, comm_, nullptr);
      if (res == ncclSuccess) res = ncclRecv(outs[p].data_ptr(), outs[p].numel(), type, p, comm_, nullptr);
    }
    return res;
  });
  for (int p = 0; p < getSize(); p++) land(outputs[p], outs[p]);
  return completed_work(outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  std::lock_guard<std::mutex> hold(mu_);
  (void)tag;  // weft, as NCCL, matches point-to-point calls by order between a pair of ranks
  at::Tensor buf = dense(single(tensors, "send"));
  check(ncclSend(buf.data_ptr(), buf.numel(), nccl_type(buf, "send"), dst_rank, comm_, nullptr), "ncclSend");
  return completed_work(tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  std::lock_guard<std::mutex> hold(mu_);
  (void)tag;
  return in_place(tensors, "recv", [&](at::Tensor& b) {
    return ncclRecv(b.data_ptr(), b.numel(), nccl_type(b, "recv"), src_rank, comm_, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  (void)tensors;
  (void)tag;
  TORCH_CHECK(false, "weft: recv from any source is not supported (NCCL's API has no wildcard source); "
                     "pass src to recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::barrier(const c10d::BarrierOptions& opts) {
  std::lock_guard<std::mutex> hold(mu_);
  (void)opts;
  at::Tensor one = at::ones({1}, at::kInt);
  check(ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclInt32, ncclSum, comm_, nullptr), "barrier");
  return completed_work({});
}

}  // namespace weft_torch
