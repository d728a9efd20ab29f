// The CUDA implementations' factories (builds with PENTAD_CUDA=ON): the only
// names of cuda/ that code outside it uses (app/runtime.cpp, GPU tests and
// benchmarks).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "comm/comm.hpp"

namespace pentad {

// device = local_rank modulo the visible GPUs. Fails with a message when no
// usable GPU is present.
std::unique_ptr<Backend> make_cuda_backend(int local_rank);
// Turns the fused bf16 attention forward (cuda/attention_flash.cu) on or
// off on a CUDA backend (the tests and benchmarks compare it with the
// cuBLAS path); false when `be` is not one.
bool set_cuda_fused_attention(Backend& be, bool on);
// True when this build has the CUDA backend and a GPU can be used here.
bool cuda_device_available(std::string* why = nullptr);

// Host-staged MPI on device buffers (several ranks may share one GPU), and
// NCCL bound to the same group: one communicator per group, created from
// `comm` (collective over it); a collective that has not finished after
// timeout_s, or an NCCL asynchronous error, ends the job.
std::unique_ptr<Comm> make_staged_mpi_comm(MPI_Comm comm, std::string name, Backend& be);
std::unique_ptr<Comm> make_nccl_comm(MPI_Comm comm, std::string name, Backend& be,
                                     double timeout_s);

}  // namespace pentad
