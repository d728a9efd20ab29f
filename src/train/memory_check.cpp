// The memory refusal (see memory_check.hpp). Sizes are doubles throughout:
// the decks this guards against (micro_batch 1e8, n_layers 1e6, d_model 1e9)
// overflow int products and even size_t ones.
#include "train/memory_check.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "comm/host.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "plan/planner.hpp"

namespace pentad {
namespace {

// MemAvailable of /proc/meminfo in bytes; 0 when it cannot be read.
double mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return 0;
}

std::string host_name() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  return host;
}

std::string bytes_text(double b) {
  char exact[32];
  std::snprintf(exact, sizeof exact, " (%.3g bytes)", b);
  return format_bytes(b, 2) + exact;
}

// The deck keys behind the largest term of a rank's plan.
const char* keys_for(const MemBytes& bytes) {
  const double state = bytes[int(Mem::params)] + bytes[int(Mem::grads)] + bytes[int(Mem::optim)];
  const double work = bytes[int(Mem::activations)] + bytes[int(Mem::scratch)] + bytes[int(Mem::comm)];
  if (state >= work)
    return "the parameters, gradients and AdamW moments grow with model.n_layers, model.d_model, model.d_ff and "
           "model.vocab_size (model.n_experts with MoE); parallel.tp, parallel.pp and parallel.zero spread them";
  return "the activations grow with train.micro_batch x model.seq_len x model.d_model and model.n_layers; "
         "train.recompute, parallel.tp with parallel.sp, parallel.cp and parallel.pp shrink them";
}

constexpr const char* kTokenKeys =
    "the host token buffers grow with train.micro_batch x train.grad_accum x model.seq_len";

// How many entries of `all` equal `mine` (ranks sharing a host or a device).
int count_equal(const std::vector<std::string>& all, const std::string& mine) {
  return int(std::count(all.begin(), all.end(), mine));
}

}  // namespace

std::string memory_refusal(const MemoryDemand& d) {
  double need = 0;
  std::string parts;
  for (const auto& [name, b] : d.parts) {
    if (b <= 0) continue;
    need += b;
    parts += (parts.empty() ? "" : ", ") + name + " " + format_bytes(b, 2);
  }
  if (need <= d.available_bytes) return "";
  return "memory: the layout does not fit: rank " + std::to_string(d.rank) + " (pipeline stage " +
         std::to_string(d.stage) + ") plans " + bytes_text(need) + " of " + d.memory + " (" + parts +
         ") but has " + bytes_text(d.available_bytes) + " (" + d.available_from + "); " + d.keys +
         " (pentad plan DECK --ranks N lists the layouts that fit)";
}

std::vector<MemoryDemand> memory_demands(const Config& cfg, int rank, int stage, const MemoryOffer& offer) {
  MemoryEstimate est;
  try {
    est = estimate_memory(cfg);
  } catch (const std::exception&) {
    return {};  // a deck the planner cannot model: no refusal on its account
  }
  if (stage < 0 || size_t(stage) >= est.stages.size()) return {};
  const StageMemory& sm = est.stages[size_t(stage)];
  // The trainer's host token buffers of a step: (A*b, T) inputs and
  // targets, and this cp rank's (A*b, T/cp) of them.
  const TrainConfig& tc = cfg.train;
  const double seqs = double(tc.micro_batch) * tc.grad_accum;
  const double tokens = 2.0 * seqs * (cfg.model.seq_len + double(cfg.model.seq_len) / cfg.parallel.cp);
  const double host_bytes = tokens * sizeof(int32_t);

  MemoryDemand model;  // the model's buffers, in the backend's memory
  model.rank = rank;
  model.stage = stage;
  for (int c = 0; c < kMemCategories; ++c) model.parts.emplace_back(mem_name(Mem(c)), sm.bytes[size_t(c)]);
  model.keys = keys_for(sm.bytes);

  MemoryDemand host = model;  // host RAM: the token buffers, and the model's buffers on cpu
  if (offer.device) {
    host.parts.clear();
    host.keys = kTokenKeys;
  }
  host.memory = "host memory";
  host.parts.emplace_back("host token buffers", host_bytes);
  host.available_bytes = offer.host_available_bytes / offer.ranks_on_host;
  host.available_from = "MemAvailable " + format_bytes(offer.host_available_bytes, 2) + " on host " + offer.host +
                        " / " + std::to_string(offer.ranks_on_host) + " rank(s) there";

  std::vector<MemoryDemand> out;
  if (offer.device) {
    const DeviceMemory& d = *offer.device;
    model.memory = "device memory";
    model.available_bytes = double(d.free_bytes) / offer.ranks_on_device;
    model.available_from = "device " + std::to_string(d.device) + " of host " + offer.host + " reports " +
                           format_bytes(double(d.free_bytes), 2) + " free of " +
                           format_bytes(double(d.total_bytes), 2) + " / " +
                           std::to_string(offer.ranks_on_device) + " rank(s) on it";
    out.push_back(model);
  }
  if (offer.host_available_bytes > 0) out.push_back(host);
  return out;
}

void check_memory_fits(const Config& cfg, const Topology& topo, const Backend& be) {
  MemoryOffer offer;
  offer.host = host_name();
  offer.host_available_bytes = mem_available_bytes();
  offer.device = be.device_memory();
  // Ranks that share this node share its memory; ranks that share a device, its memory.
  const std::string my_device = offer.host + " device " + std::to_string(offer.device ? offer.device->device : -1);
  offer.ranks_on_host = count_equal(host::allgather_strings(topo.job, offer.host), offer.host);
  offer.ranks_on_device = count_equal(host::allgather_strings(topo.job, my_device), my_device);

  std::string msg;
  // A backend other than cpu without device memory of its own (none yet): nothing to compare.
  if (offer.device || be.name() == "cpu")
    for (const MemoryDemand& d : memory_demands(cfg, topo.rank, topo.me.pp, offer))
      if (msg.empty()) msg = memory_refusal(d);
  agree_or_throw(msg.empty(), msg, topo.job);
}

}  // namespace pentad
