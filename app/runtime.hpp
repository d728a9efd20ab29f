// Run-time choice of the compute backend (deck key `backend`), its matrix
// precision (`train.dtype`) and the collectives library (`parallel.comm`).
// The one place that knows which implementations this build contains.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "config/config.hpp"

namespace pentad {

// Whether this binary contains the backend (cuda: built with PENTAD_CUDA=ON).
bool backend_built(BackendKind kind);

// train.threads = 0: 0 (OpenMP's own default) when OMP_NUM_THREADS is set;
// else the cores this rank may run on (its affinity mask), divided among
// the job's ranks on this node when the mask is the whole node (ranks the
// launcher bound to their own cores keep theirs). Collective over `job`.
int default_threads(MPI_Comm job);

// Collective over `job` (finds the node-local rank that picks the GPU, and
// the ranks sharing this node's cores).
// Throws InputError, alike on every rank, when this binary lacks the backend.
std::unique_ptr<Backend> make_backend(const Config& cfg, MPI_Comm job);
// A Comm over `comm` for buffers of `be`: MPI on host memory for the cpu
// backend; with cuda, NCCL (comm = auto | nccl) or host-staged MPI (comm = mpi).
// Collective over `comm`.
std::unique_ptr<Comm> make_comm(const Config& cfg, Backend& be, MPI_Comm comm, std::string name);

}  // namespace pentad
