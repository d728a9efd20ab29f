// The memory refusal (see memory_check.hpp). Sizes are doubles throughout:
// the decks this guards against (micro_batch 1e8, n_layers 1e6, d_model 1e9)
// overflow int products and even size_t ones.
#include "train/memory_check.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
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

}  // namespace

void check_memory_fits(const Config& cfg, const Topology& topo, const Backend& be) {
  // Ranks that share this node share its memory.
  const std::string me = host_name();
  const std::vector<std::string> hosts = host::allgather_strings(topo.job, me);
  const int on_node = int(std::count(hosts.begin(), hosts.end(), me));

  bool ok = true;
  std::string msg;
  const double avail = mem_available_bytes();
  if (be.name() == "cpu" && avail > 0) {
    MemoryEstimate est;
    try {
      est = estimate_memory(cfg);
    } catch (const std::exception&) {
      est.stages.clear();  // a deck the planner cannot model: no refusal on its account
    }
    const int stage = topo.me.pp;
    if (size_t(stage) < est.stages.size()) {
      const StageMemory& sm = est.stages[size_t(stage)];
      // The trainer's host token buffers of a step: (A*b, T) inputs and
      // targets, and this cp rank's (A*b, T/cp) of them.
      const TrainConfig& tc = cfg.train;
      const double seqs = double(tc.micro_batch) * tc.grad_accum;
      const double tokens = 2.0 * seqs * (cfg.model.seq_len + double(cfg.model.seq_len) / cfg.parallel.cp);
      const double host_bytes = tokens * sizeof(int32_t);
      const double need = sm.total + host_bytes, have = avail / on_node;
      if (need > have) {
        ok = false;
        std::string parts;
        for (int c = 0; c < kMemCategories; ++c)
          if (sm.bytes[size_t(c)] > 0) parts += std::string(mem_name(Mem(c))) + " " + format_bytes(sm.bytes[size_t(c)], 2) + ", ";
        msg = "memory: the layout does not fit: rank " + std::to_string(topo.rank) + " (pipeline stage " +
              std::to_string(stage) + ") plans " + bytes_text(need) + " (" + parts + "host token buffers " +
              format_bytes(host_bytes, 2) + ") but has " + bytes_text(have) + " (MemAvailable " +
              format_bytes(avail, 2) + " on host " + me + " / " + std::to_string(on_node) + " rank(s) there); " +
              keys_for(sm.bytes) + " (pentad plan DECK --ranks N lists the layouts that fit)";
      }
    }
  }
  agree_or_throw(ok, msg, topo.job);
}

}  // namespace pentad
