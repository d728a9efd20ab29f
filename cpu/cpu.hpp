// The CPU implementations' factories: the only names of cpu/ that code
// outside it uses (app/runtime.cpp, tests and benchmarks).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "comm/comm.hpp"

namespace pentad {

// The CPU backend (always built); threads = 0 keeps OpenMP's default.
std::unique_ptr<Backend> make_cpu_backend(int threads);

// The MPI implementation of Comm (host memory), used by the CPU backend.
std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, std::string name);

}  // namespace pentad
