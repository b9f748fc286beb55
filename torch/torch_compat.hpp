/*
 * torch_compat.hpp — what differs between the torch versions weft_torch
 * builds against, in one place.
 *
 * torch 1.13 (Debian 12) has one class for a process group's backend:
 * c10d::ProcessGroup, with Work nested as c10d::Work (Work.hpp). torch 2.x
 * splits it: a backend subclasses c10d::Backend and torch wraps it in a
 * ProcessGroup itself. The rest of weft_torch names only WeftBackendBase and
 * the option types below.
 *
 * WEFT_TENSOR_COALESCED: torch 2.x's Backend has allgather_into_tensor_coalesced
 * and reduce_scatter_tensor_coalesced, which its functional collectives
 * (torch.distributed._functional_collectives, hence DTensor) call for every
 * all_gather_tensor and reduce_scatter_tensor; 1.13 has neither.
 */
#pragma once

#include <torch/version.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace weft_torch {
using WeftBackendBase = c10d::Backend;
}
#define WEFT_TENSOR_COALESCED 1
#else
namespace weft_torch {
using WeftBackendBase = c10d::ProcessGroup;
}
#define WEFT_TENSOR_COALESCED 0
#endif
