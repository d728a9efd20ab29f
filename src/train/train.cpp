// `pentad train`: the entry point the application calls. The run itself is
// the Trainer (trainer.hpp): setup, steps, evaluation, logging, checkpoints.
#include "train/train.hpp"

#include "train/trainer.hpp"

namespace pentad {

int run_train(const Config& cfg, MPI_Comm job_comm, const Placement& placement, Backend& be,
              const CommFactory& make_comm) {
  Trainer trainer(cfg, job_comm, placement, be, make_comm);
  return trainer.run();
}

}  // namespace pentad
