// Backend and communication selection (see runtime.hpp).
#include "runtime.hpp"

#include "comm/host.hpp"
#include "core/error.hpp"
#include "cpu.hpp"
#ifdef PENTAD_HAVE_CUDA
#include "cuda.hpp"
#endif

namespace pentad {

std::unique_ptr<Backend> make_backend(const Config& cfg, MPI_Comm job) {
  std::unique_ptr<Backend> be;
  if (cfg.backend == "cuda") {
#ifdef PENTAD_HAVE_CUDA
    // The node-local rank picks the GPU: ranks of one node share memory.
    MPI_Comm node = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split_type(job, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int local_rank = 0;
    MPI_CHECK(MPI_Comm_rank(node, &local_rank));
    MPI_CHECK(MPI_Comm_free(&node));
    // Every rank must have a GPU; agree before touching one, so a CPU-only
    // node gives one clear message instead of a rank-local abort.
    std::string why;
    const bool ok = cuda_device_available(&why);
    agree_or_throw(ok, "backend = cuda: " + why, job);
    be = make_cuda_backend(local_rank);
#else
    throw InputError("backend = cuda: this binary was built without the CUDA backend (PENTAD_CUDA=OFF)");
#endif
  } else {
    be = make_cpu_backend(cfg.train.threads);
  }
  be->set_compute_dtype(cfg.train.dtype == "bf16" ? Dtype::bf16 : Dtype::fp32);
  return be;
}

std::unique_ptr<Comm> make_comm(const Config& cfg, Backend& be, MPI_Comm comm, std::string name) {
  if (cfg.backend != "cuda") return make_mpi_comm(comm, std::move(name));
#ifdef PENTAD_HAVE_CUDA
  if (cfg.parallel.comm == "mpi") return make_staged_mpi_comm(comm, std::move(name), be);
  return make_nccl_comm(comm, std::move(name), be, cfg.parallel.comm_timeout_s);
#else
  (void)be;
  throw InputError("backend = cuda: this binary was built without the CUDA backend");
#endif
}

}  // namespace pentad
