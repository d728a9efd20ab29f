// checkpoint.init_from: start a run from weights. The source is a Hugging
// Face directory or .safetensors file (GPT2LMHeadModel, LlamaForCausalLM,
// MixtralForCausalLM: io/hf_map.hpp), an llm.c GPT-2 .bin (version 3 fp32 or
// 5 bf16, padded vocabulary rows dropped), or a pentad checkpoint (its
// model/ tensors only). Every source yields pentad's global tensors, which
// land in this run's blocks through the same CkptTensor list resume uses,
// so any layout loads any source. Optimizer moments and the step stay fresh.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "config/config.hpp"
#include "io/checkpoint.hpp"

namespace pentad {

// Collective over comm. Sets every "model/..." tensor of `tensors` (the
// trainer's checkpoint list; the optim/ ones are left alone) from spec.
// Shapes and sizes are checked against the deck m: a mismatch, a missing or
// unknown tensor, a bad file is an InputError naming the file, the tensor
// and both shapes, raised on every rank. Returns one line for the log.
std::string load_init_weights(const std::string& spec, const ModelConfig& m, const std::string& signature,
                              const std::vector<CkptTensor>& tensors, MPI_Comm comm);

}  // namespace pentad
