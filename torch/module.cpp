/*
 * module.cpp — the Python module weft_torch._C: the ProcessGroupWeft type
 * and the constructor torch.distributed calls for backend "weft" (with
 * the store, rank, world size and timeout of init_process_group).
 */
#include <pybind11/chrono.h>
#include <torch/extension.h>

#include "process_group.hpp"

namespace {

c10::intrusive_ptr<weft_torch::ProcessGroupWeft> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                        int size, std::chrono::milliseconds timeout) {
  return c10::make_intrusive<weft_torch::ProcessGroupWeft>(store, rank, size, timeout);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "weft's collectives as a torch.distributed backend for CPU tensors";
  py::module::import("torch.distributed");  // registers c10d's ProcessGroup type, our base
  py::class_<weft_torch::ProcessGroupWeft, weft_torch::WeftBackendBase,
             c10::intrusive_ptr<weft_torch::ProcessGroupWeft>>(m, "ProcessGroupWeft");
  m.def("create_process_group", &create, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
}
