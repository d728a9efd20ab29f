// `pentad train`: the training driver (see train.cpp).
#pragma once

#include <mpi.h>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "comm/host.hpp"  // agree_or_throw: app/main.cpp uses it through this header (move it there)
#include "config/config.hpp"

namespace pentad {

// Collective over job. Throws InputError for errors every rank detects alike.
// be is the run's backend, made by the application; make_comm builds the
// Comm of each group for it.
int run_train(const Config& cfg, MPI_Comm job, Backend& be, const CommFactory& make_comm);

}  // namespace pentad
