// The GPU benchmark's model shapes (bench/cuda_mfu), at T = 1024: GPT-2
// 124M and 350M (tied, F = 4C, V = 50257) and a ~1.1B Llama (L 16, C 2048,
// 32/8 heads, F 8192, V 32000, untied), each with its micro-batch. One list,
// so the host-side launch test (tests/unit/test_cuda_launch) checks exactly
// the shapes the benchmark runs.
#pragma once

#include <vector>

#include "config/config.hpp"

namespace pentad {

inline ModelConfig gpt2_shape(int n_layers, int d_model, int n_heads) {
  ModelConfig m;
  m.family = Family::gpt2;
  m.n_layers = n_layers;
  m.d_model = d_model;
  m.n_heads = n_heads;
  m.n_kv_heads = n_heads;
  m.d_ff = 4 * d_model;
  m.vocab_size = 50257;
  m.seq_len = 1024;
  m.tied_embeddings = 1;
  return m;
}

inline ModelConfig llama_1b_shape() {
  ModelConfig m;
  m.family = Family::llama;
  m.n_layers = 16;
  m.d_model = 2048;
  m.n_heads = 32;
  m.n_kv_heads = 8;
  m.d_ff = 8192;
  m.vocab_size = 32000;
  m.seq_len = 1024;
  m.tied_embeddings = 0;
  return m;
}

struct BenchShape {
  const char* name;
  ModelConfig m;
  int batch;
};

inline std::vector<BenchShape> gpu_bench_shapes() {
  return {{"gpt2-124m", gpt2_shape(12, 768, 12), 16},
          {"gpt2-350m", gpt2_shape(24, 1024, 16), 8},
          {"llama-1b", llama_1b_shape(), 4}};
}

}  // namespace pentad
