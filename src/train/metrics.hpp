// Run accounting: FLOPs per token (the formula the README documents), the
// measured peak used for MFU, and the JSON-lines metrics file.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace pentad {

// Training FLOPs per token: 6*N + 12*L*C*T (forward + backward; N = every
// parameter, tied embeddings once; the attention term counts the full,
// non-causal score matrix as in PaLM appendix B).
double flops_per_token(const ModelConfig& m, double n_params);

// The parameters outside the embeddings: n_params less the token embedding
// (V x C), the learned positions (T x C, GPT-2) and an untied output head
// (V x C). n_params counts a tied embedding once.
double non_embedding_params(const ModelConfig& m, double n_params);

// The standard model-FLOPs count, for comparing MFU across trainers:
// 6 x the non-embedding parameters + 6*L*C*T, the attention score and
// value products (2 x 2*T*C per token per layer forward, x 3 with the
// backward) over the causal half of the score matrix. Neither the head's
// product nor the masked half is counted.
double standard_flops_per_token(const ModelConfig& m, double n_params);

// Measured single-rank fp32 GEMM rate in TFLOP/s (1024^3 sgemm, best of 3).
double measure_peak_tflops(Backend& be);

// Peak resident set size of this process in bytes (getrusage).
size_t max_rss_bytes();

// One JSON object per line; values are numbers or strings. Each row is
// flushed as it is written, and a row that cannot be written (a full disk) is
// a fatal error naming the file: a run never goes on losing its metrics.
class MetricsFile {
 public:
  MetricsFile() = default;
  explicit MetricsFile(const std::string& path);  // throws InputError if it cannot be opened
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  bool open() const { return f_ != nullptr; }
  void write(const std::vector<std::pair<std::string, double>>& numbers,
             const std::vector<std::pair<std::string, std::string>>& strings = {});

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

}  // namespace pentad
