// The weights the inference engine runs on: every parameter of a model as a
// GLOBAL host tensor, keyed by its checkpoint name ("model/wte", ...), and
// the model's config. They come from a pentad checkpoint file or an exported
// model.h5 (`pentad ckpt export`), read serially by one process (both hold
// global tensors whatever the layout that trained them), or from the
// training run itself (gather.hpp). The names and shapes expected are those
// of model/param_list.hpp for one rank holding the whole model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace pentad {

struct HostTensor {
  std::vector<int64_t> shape;  // global shape
  std::vector<float> data;     // row-major
};

struct ModelWeights {
  ModelConfig cfg;
  std::map<std::string, HostTensor> tensors;  // every tensor of model_param_list(cfg, one rank)
  int64_t step = 0;        // the optimizer step that wrote them
  std::string source;      // the file, for messages
};

// The model config of a resolved deck (a checkpoint's `config` attribute):
// parsed by config/ with the deck's own layout, so it validates as it did
// when it trained. Throws InputError naming `where`.
ModelConfig model_config_of_deck(const std::string& deck_text, const std::string& where);

// Reads a pentad checkpoint file (format pentad-checkpoint) or an exported
// weights file (pentad-weights): the config attribute and every model/
// tensor, each checked against the shape the config implies. Local (one
// process); throws InputError naming the file and the tensor.
ModelWeights load_model_weights(const std::string& path);

// The weights of a Hugging Face model directory (io/hf_import.hpp) for cfg
// (hf::model_of_dir's model, whose seq_len may be cut to what a sample
// needs: GPT-2's position table is then read as its first seq_len rows).
// Local; InputError naming the directory and the tensor.
ModelWeights load_hf_weights(const std::string& dir, const ModelConfig& cfg);

// What `pentad sample CKPT` reads for CKPT: an export directory (its
// model.h5), a checkpoint directory or its `latest` pointer file, the word
// latest (ckpt/latest), or a file. Throws InputError naming what is missing.
std::string resolve_weights_path(const std::string& spec);

}  // namespace pentad
