// Reading a Hugging Face model's safetensors as pentad tensors (hf_import.hpp).
#include "io/hf_import.hpp"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json.hpp"
#include "io/checkpoint_internal.hpp"

namespace pentad::hf {

namespace {

namespace fs = std::filesystem;
using ckpt_detail::n_elements;
using ckpt_detail::shape_str;

bool ends_with(const std::string& s, const std::string& x) { return ckpt_detail::ends_with(s, x); }

}  // namespace

bool is_model_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && (fs::exists(fs::path(path) / "model.safetensors", ec) ||
                                        fs::exists(fs::path(path) / "model.safetensors.index.json", ec));
}

ModelConfig model_of_dir(const std::string& dir) {
  const std::string cfg = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (!fs::exists(cfg, ec)) throw InputError("'" + dir + "': the directory has no config.json");
  const auto text = read_text(cfg);
  if (!text) throw InputError("'" + cfg + "' cannot be read");
  return model_of_config_json(*text, "'" + cfg + "'");
}

namespace {

// A directory's generation_config.json as an object (null when there is
// none), *what naming it.
nlohmann::json generation_config(const std::string& dir, std::string* what) {
  const std::string path = (fs::path(dir) / "generation_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return nullptr;
  const auto text = read_text(path);
  *what = "'" + path + "'";
  if (!text) throw InputError(*what + " cannot be read");
  nlohmann::json j = parse_json(*text, *what);
  if (!j.is_object()) throw InputError(*what + " is not a JSON object");
  return j;
}

}  // namespace

std::vector<int64_t> generation_eos_ids(const std::string& dir) {
  std::string what;
  const nlohmann::json j = generation_config(dir, &what);
  if (j.is_null()) return {};
  const auto eos = j.find("eos_token_id");
  if (eos == j.end() || eos->is_null()) return {};
  const nlohmann::json list = eos->is_array() ? *eos : nlohmann::json::array({*eos});
  std::vector<int64_t> ids;
  for (const auto& x : list) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0)
      throw InputError(what + ": \"eos_token_id\" = " + eos->dump() + " is not a token id or a list of them");
    ids.push_back(x.get<int64_t>());
  }
  return ids;
}

GenerationDefaults generation_defaults(const std::string& dir) {
  std::string what;
  const nlohmann::json j = generation_config(dir, &what);
  GenerationDefaults g;
  if (j.is_null()) return g;
  using json = nlohmann::json;
  // The value of key where it is there and not null, else null; one that
  // fails ok is named with fault.
  const auto value = [&](const char* key, bool (*ok)(const json&), const char* fault) -> const json* {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return nullptr;
    if (!ok(*it)) throw InputError(what + ": \"" + key + "\" = " + it->dump() + " " + fault);
    return &*it;
  };
  const auto boolean = [](const json& v) { return v.is_boolean(); };
  const auto at_least_0 = [](const json& v) { return v.is_number() && v.get<double>() >= 0; };
  const auto above_0 = [](const json& v) { return v.is_number() && v.get<double>() > 0; };
  const auto in_0_1 = [](const json& v) { return v.is_number() && v.get<double>() > 0 && v.get<double>() <= 1; };
  const auto count = [](const json& v) {
    return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 2147483647;
  };
  if (const json* x = value("do_sample", boolean, "is not true or false")) g.do_sample = x->get<bool>();
  if (const json* x = value("temperature", at_least_0, "is not a number >= 0")) g.temperature = x->get<double>();
  if (const json* x = value("top_k", count, "is not an integer >= 0")) g.top_k = int(x->get<int64_t>());
  if (const json* x = value("top_p", in_0_1, "is not in (0, 1]")) g.top_p = x->get<double>();
  if (const json* x = value("repetition_penalty", above_0, "is not a number > 0"))
    g.repetition_penalty = x->get<double>();
  const auto in_closed_0_1 = [](const json& v) {
    return v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1;
  };
  if (const json* x = value("min_p", in_closed_0_1, "is not in [0, 1]")) g.min_p = x->get<double>();
  return g;
}

Import::Import(const std::string& path, const ModelConfig& m, const std::string& where,
               const std::string& config_prefix)
    : st_(path), m_(m), where_(where) {
  std::error_code ec;
  const fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path cfg = dir / "config.json";
  std::string config_text;
  if (fs::exists(cfg, ec)) {
    const auto text = read_text(cfg.string());
    if (!text) throw InputError("'" + cfg.string() + "' cannot be read");
    config_text = *text;
    config_ = cfg.string();
  } else if (fs::is_directory(path, ec)) {
    throw InputError(where + ": the directory has no config.json");
  }
  // A Llama deck reads a Phi-3's fused tensors as well as a Llama's.
  arch_ = import_arch(arch_of(m, where, nullptr), config_text, [&](const std::string& n) { return find(n); });
  // GPT-2's position table may be longer than this run's seq_len (fine-tuning
  // at a shorter context, sampling a shorter sequence): its first seq_len
  // rows are taken.
  ModelConfig wide = m;
  if (arch_ == Arch::gpt2) {
    const safetensors::TensorInfo* wpe = find("transformer.wpe.weight");
    if (wpe && wpe->shape.size() == 2 && wpe->shape[0] > m.seq_len) wide.seq_len = int(wpe->shape[0]);
  }
  rules_ = rules(wide, arch_);
  if (!config_.empty()) {
    const std::string quoted = std::string("'").append(config_).append("'");  // (not "'" + ...: GCC 12's -Wrestrict)
    if (std::string err = check_config_json(config_text, quoted, m, arch_); !err.empty())
      throw InputError(config_prefix + err);
  }
  for (const Rule& r : rules_) {
    const safetensors::TensorInfo* t = find(r.hf);
    if (!t)
      throw InputError(where + " has no tensor '" + r.hf + "' (pentad's " + r.pentad + " in " + arch_class(arch_) +
                       ")");
    if (t->shape != r.hf_shape)
      throw InputError(where + ": tensor '" + r.hf + "' has shape " + shape_str(t->shape) + ", but the deck's " +
                       arch_class(arch_) + " needs " + shape_str(r.hf_shape) + " (pentad's " + r.pentad + " " +
                       shape_str(r.pentad_shape) + ")");
  }
}

std::vector<float> Import::tensor(const std::string& name, const std::vector<int64_t>& shape) {
  if (std::none_of(rules_.begin(), rules_.end(), [&](const Rule& r) { return r.pentad == name; }))
    throw InputError(where_ + ": the deck's tensor '" + name + "' " + shape_str(shape) + " has no counterpart in " +
                     arch_class(arch_));
  std::vector<float> out = build_pentad(rules_, name, [&](const std::string& n) -> const std::vector<float>& {
    return read(n);
  });
  out.resize(size_t(n_elements(shape)));  // a longer wpe: its first seq_len rows (row-major, so a prefix)
  return out;
}

std::string Import::unused() const {
  std::vector<std::string> rule_names = hf_names(rules_);
  for (const std::string& n : st_.names()) {
    if (std::find(rule_names.begin(), rule_names.end(), n) != rule_names.end()) continue;
    if (std::find(rule_names.begin(), rule_names.end(), "transformer." + n) != rule_names.end()) continue;
    // Buffers, not weights: GPT-2's causal masks, old Llama's RoPE frequencies;
    // a tied head stored next to its embedding.
    if (ends_with(n, ".attn.bias") || ends_with(n, ".attn.masked_bias") || ends_with(n, "rotary_emb.inv_freq"))
      continue;
    if (n == "lm_head.weight" && m_.tied()) continue;
    return where_ + ": tensor '" + n + "' has no place in the deck's " + arch_class(arch_) +
           " (another model, or a deck that differs from it?)";
  }
  return {};
}

std::string Import::describe() const {
  return std::string(arch_class(arch_)) + ", safetensors " + st_.first().tensors().front().dtype +
         (config_.empty() ? ", no config.json" : ", config.json checked");
}

// name, or its GPT-2 form without "transformer." (files saved from GPT2Model).
const safetensors::TensorInfo* Import::find(const std::string& name) const {
  if (const auto* t = st_.find(name)) return t;
  if (name.rfind("transformer.", 0) == 0) return st_.find(name.substr(12));
  return nullptr;
}

const std::vector<float>& Import::read(const std::string& name) {
  for (auto& [n, v] : cache_)
    if (n == name) return v;
  if (cache_.size() >= 4) cache_.pop_front();
  const std::string stored = st_.find(name) ? name : name.substr(12);
  cache_.emplace_back(name, st_.read(stored));
  return cache_.back().second;
}

}  // namespace pentad::hf
