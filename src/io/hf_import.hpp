// Reading a Hugging Face model (GPT2LMHeadModel, LlamaForCausalLM and its
// relatives: io/hf_map.hpp) as pentad's global tensors, on one
// process. checkpoint.init_from (io/init_from.hpp) broadcasts what it reads
// to the job's blocks; `pentad sample` (infer/weights.hpp) keeps it whole.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "io/hf_map.hpp"
#include "io/safetensors.hpp"

namespace pentad::hf {

// A directory with model.safetensors or model.safetensors.index.json.
bool is_model_dir(const std::string& path);

// The model of a directory's config.json (model_of_config_json), with
// model.seq_len its max_position_embeddings (GPT-2: n_positions). InputError
// naming the file when there is none or pentad has no such model.
ModelConfig model_of_dir(const std::string& dir);

// The ids a directory's generation_config.json names in "eos_token_id" (one
// id or a list: Llama 3 Instruct's and Qwen2.5 Instruct's end a turn with
// another token than the tokenizer's end-of-text); none when the file or the
// key is missing or null. InputError naming the file and the key otherwise.
std::vector<int64_t> generation_eos_ids(const std::string& dir);

// The sampling settings a directory's generation_config.json gives
// (those its authors set for transformers' generate()): "do_sample",
// "temperature", "top_k", "top_p", "min_p" and "repetition_penalty", each where the
// file has it (a missing or null key: none; transformers' own defaults,
// such as its top_k 50, are not filled in). InputError naming the file and
// the key for a value out of range: do_sample not true or false, a
// temperature below 0, top_k not an integer >= 0, top_p outside (0, 1],
// min_p outside [0, 1], a repetition_penalty not above 0.
struct GenerationDefaults {
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p, repetition_penalty, min_p;
  std::optional<int> top_k;
};
GenerationDefaults generation_defaults(const std::string& dir);

// The safetensors of `path` (a directory or one .safetensors file) as the
// tensors of the model m. The constructor checks config.json beside them
// against m (where there is one; a directory must have it) and that every
// tensor m's class needs is there with its shape (a Llama deck reads a
// Phi3ForCausalLM's fused tensors: hf::import_arch). A GPT-2 position table
// longer than m.seq_len is read as its first seq_len rows. Messages start
// with `where` (e.g. "checkpoint.init_from = 'DIR'"); a config.json that
// differs from m is reported as config_prefix + the difference.
class Import {
 public:
  Import(const std::string& path, const ModelConfig& m, const std::string& where, const std::string& config_prefix);
  // The whole pentad tensor `name` of global shape `shape`, row-major.
  std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape);
  // After every tensor: a tensor of the files that has no place in m ("" = none).
  std::string unused() const;
  std::string describe() const;  // "LlamaForCausalLM, safetensors BF16, config.json checked"

 private:
  const safetensors::TensorInfo* find(const std::string& name) const;
  const std::vector<float>& read(const std::string& name);

  safetensors::Model st_;
  ModelConfig m_;
  std::string where_;
  Arch arch_ = Arch::gpt2;
  std::vector<Rule> rules_;
  std::string config_;
  std::deque<std::pair<std::string, std::vector<float>>> cache_;
};

}  // namespace pentad::hf
