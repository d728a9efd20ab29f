// `pentad train`: the training driver (see train.cpp).
#pragma once

#include <mpi.h>

#include "config.hpp"

namespace pentad {

// Collective over job. Throws InputError for errors every rank detects alike.
int run_train(const Config& cfg, MPI_Comm job);

}  // namespace pentad
