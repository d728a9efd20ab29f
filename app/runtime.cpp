// Backend and communication selection (see runtime.hpp).
#include "runtime.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "comm/host.hpp"
#include "core/error.hpp"
#include "cpu.hpp"
#ifdef PENTAD_HAVE_CUDA
#include "cuda.hpp"
#endif

namespace pentad {

bool backend_built(BackendKind kind) {
#ifdef PENTAD_HAVE_CUDA
  (void)kind;
  return true;
#else
  return kind == BackendKind::cpu;
#endif
}

namespace {

// Every rank parses the same deck, so every rank throws here alike: the
// collective error path, before any rank touches a device.
void require_built(const Config& cfg) {
  if (!backend_built(cfg.backend))
    throw InputError(cfg.source + ": backend = " + deck_name(cfg.backend) +
                     ": this binary was built without the CUDA backend");
}

}  // namespace

int default_threads(MPI_Comm job) {
  const int on_node = host::node_size(job);  // collective: every rank calls it
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr && *env != '\0') return 0;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0 || online < 1) return 0;
  const int mine = CPU_COUNT(&mask);
  // A launcher that bound this rank to fewer cores than the node has gave
  // it those; ranks sharing the whole node share its cores.
  return mine < online ? mine : std::max(1, mine / std::max(1, on_node));
}

std::unique_ptr<Backend> make_backend(const Config& cfg, MPI_Comm job) {
  require_built(cfg);
  std::unique_ptr<Backend> be;
  if (cfg.backend == BackendKind::cuda) {
#ifdef PENTAD_HAVE_CUDA
    // The node-local rank picks the GPU: ranks of one node share memory.
    const int local_rank = host::node_rank(job);
    // Every rank must have a GPU; agree before touching one, so a CPU-only
    // node gives one clear message instead of a rank-local abort.
    std::string why;
    const bool ok = cuda_device_available(&why);
    agree_or_throw(ok, "backend = cuda: " + why, job);
    be = make_cuda_backend(local_rank);
#endif
  } else {
    const int threads = default_threads(job);  // collective: called on every rank alike
    be = make_cpu_backend(cfg.train.threads > 0 ? cfg.train.threads : threads);
  }
  be->set_compute_dtype(cfg.train.dtype == ComputeDtype::bf16 ? Dtype::bf16 : Dtype::fp32);
  be->set_weight_copies(cfg.train.bf16_weight_copies);
  be->set_bf16_activations(cfg.train.bf16_activations);
  return be;
}

std::unique_ptr<Comm> make_comm(const Config& cfg, Backend& be, MPI_Comm comm, std::string name) {
  require_built(cfg);
  switch (comm_impl_of(cfg.backend, cfg.parallel.comm)) {
    case CommImpl::mpi: return make_mpi_comm(comm, std::move(name));
#ifdef PENTAD_HAVE_CUDA
    case CommImpl::staged_mpi: return make_staged_mpi_comm(comm, std::move(name), be);
    case CommImpl::nccl: return make_nccl_comm(comm, std::move(name), be, cfg.parallel.comm_timeout_s);
#else
    case CommImpl::staged_mpi:
    case CommImpl::nccl: break;  // require_built threw: cuda selects these
#endif
  }
  (void)be;
  PENTAD_FATAL("make_comm: no Comm implementation for this deck");
}

}  // namespace pentad
