// What each Comm implementation can do, stated once. The implementations'
// supports() answer from this table, and the deck check (config.cpp) reads
// it too, so a layout the chosen Comm cannot run fails before any rank
// starts. Header-only and free of MPI, so the config layer can include it.
#pragma once

#include <array>
#include <cstddef>

#include "config/config.hpp"

namespace pentad {

// The operations a Comm may or may not implement (the rest every Comm has).
// Callers ask Comm::supports() before they rely on one; calling an
// unsupported one stops the job with a message naming the group.
enum class CommOp { isend, irecv, isendrecv, alltoallv, group };

// The Comm implementations a build may contain: MPI on host memory (the cpu
// backend), MPI staged through host memory (cuda, parallel.comm = mpi) and
// NCCL (cuda, parallel.comm = auto | nccl).
enum class CommImpl { mpi, staged_mpi, nccl };

// [CommImpl][CommOp]. Flip an entry when its feature lands: the deck check
// then lets the layouts that need it through.
inline constexpr std::array<std::array<bool, 5>, 3> kCommSupports = {{
    //  isend  irecv  isendrecv  alltoallv  group
    {{true, true, true, true, true}},     // mpi
    {{true, true, true, true, true}},     // staged_mpi (the host MPI comm does the messaging)
    {{false, false, true, true, true}},   // nccl: grouped sends and receives only (the cp ring, the
                                          // all-to-all, the pipeline's grouped plan); no lone ones
}};

constexpr bool comm_supports(CommImpl impl, CommOp op) {
  return kCommSupports[static_cast<size_t>(impl)][static_cast<size_t>(op)];
}

// The implementation a deck's (backend, parallel.comm) selects; the cpu
// backend always talks MPI (config rejects comm = nccl there).
constexpr CommImpl comm_impl_of(BackendKind backend, CommLib lib) {
  if (backend == BackendKind::cpu) return CommImpl::mpi;
  return lib == CommLib::mpi ? CommImpl::staged_mpi : CommImpl::nccl;
}

// Whether a pipeline's messages move as the grouped plan
// (parallel/pp/p2p_plan.hpp): asked for, or auto on a comm without lone
// sends and receives (NCCL). The trainer and the planner both ask this.
constexpr bool pp_messages_grouped(CommImpl impl, PpP2p p2p) {
  return p2p == PpP2p::grouped ||
         (p2p == PpP2p::automatic && !(comm_supports(impl, CommOp::isend) && comm_supports(impl, CommOp::irecv)));
}

// The implementation as messages name it ("the NCCL comm"), for what it lacks.
constexpr const char* comm_impl_name(CommImpl impl) {
  switch (impl) {
    case CommImpl::mpi: return "the MPI comm";
    case CommImpl::staged_mpi: return "the host-staged MPI comm";
    case CommImpl::nccl: return "the NCCL comm";
  }
  return "the comm";
}

}  // namespace pentad
