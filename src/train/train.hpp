// `pentad train`: the training driver (see train.cpp).
#pragma once

#include <mpi.h>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "comm/placement.hpp"
#include "config/config.hpp"

namespace pentad {

// Collective over job. Throws InputError for errors every rank detects alike.
// Returns the exit code: 0, or 130 when SIGINT stopped the run (signals.hpp).
// be is the run's backend, made by the application; make_comm builds the
// Comm of each group for it. placement: where job's ranks run, in job's
// numbering (printed at start).
int run_train(const Config& cfg, MPI_Comm job, const Placement& placement, Backend& be,
              const CommFactory& make_comm);

}  // namespace pentad
