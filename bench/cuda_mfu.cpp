// One-GPU training throughput of the CUDA backend at T = 1024: tokens/s,
// achieved TFLOP/s and MFU against 989 TFLOP/s (H100/H200 dense BF16), for
// GPT-2 124M, GPT-2 350M and a ~1.1B Llama shape, then per-op times of one
// step. MFU two ways: pentad's count, 6N + 12*L*C*T (every parameter, the
// full score matrix; src/train/metrics.cpp), and the standard model-FLOPs
// count, 6 x non-embedding parameters + 6*L*C*T (causal half).
// A step is forward + backward + global-norm clipping + AdamW, as the trainer
// runs it on one rank. Per-op times come from a second pass that wraps the
// backend and synchronises around every call (so they include launch gaps
// and add up to more than the free-running step).
//   cuda_mfu [--shape all|gpt2-124m|gpt2-350m|llama-1b] [--batch B] [--steps N]
//            [--dtype bf16|fp32] [--recompute none|selective|full] [--weight-copies on|off]
//            [--bf16-activations on|off]
// --weight-copies off converts the weights to bf16 at every GEMM instead of
// once per step (train.bf16_weight_copies = false), to measure the copies;
// --bf16-activations off keeps the MLP activation in fp32, converted at each
// GEMM (train.bf16_activations = false).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda.hpp"
#include "backend/backend.hpp"
#include "config/bench_shapes.hpp"
#include "train/metrics.hpp"
#include "model/model.hpp"
#include "parallel/dp/optimizer.hpp"
#include "core/rng.hpp"

namespace {

using pentad::Backend;
using pentad::GateAct;
using pentad::Rope;
using Clock = std::chrono::steady_clock;
constexpr double kPeakTflops = 989.0;  // H100/H200 SXM dense BF16

using Shape = pentad::BenchShape;

// Forwards every op to the real backend; when `on`, synchronises around each
// call and adds its wall time to a per-op total.
class TimedBackend final : public Backend {
 public:
  explicit TimedBackend(Backend& inner) : in_(inner) {}
  bool on = false;
  std::map<std::string, std::pair<int, double>> totals;  // op -> (calls, seconds)

  std::string name() const override { return in_.name(); }
  void* alloc_bytes(size_t n, pentad::Mem c) override { return in_.alloc_bytes(n, c); }
  void free_bytes(void* p) override { in_.free_bytes(p); }
  std::optional<pentad::DeviceMemory> device_memory() const override { return in_.device_memory(); }
  bool attention_bwd_reads_probs() const override { return in_.attention_bwd_reads_probs(); }
  void keep_weight_copy(const float* w, size_t n) override { in_.keep_weight_copy(w, n); }
  void drop_weight_copy(const float* w) override { in_.drop_weight_copy(w); }
  void weights_written(const void* p, size_t n) override { in_.weights_written(p, n); }
  size_t weight_copies_made() const override { return in_.weight_copies_made(); }
  size_t weight_copy_elem_bytes() const override { return in_.weight_copy_elem_bytes(); }
  size_t bf16_activation_bytes() const override { return in_.bf16_activation_bytes(); }
  void hold_gemm_form(const float* p, size_t n) override { in_.hold_gemm_form(p, n); }
  size_t held_activation_reads() const override { return in_.held_activation_reads(); }
  void to_gemm_form(void* d, const float* s, size_t n) override {
    time("to_gemm_form", [&] { in_.to_gemm_form(d, s, n); });
  }
  void copy_bytes(void* d, const void* s, size_t n) override { time("copy_bytes", [&] { in_.copy_bytes(d, s, n); }); }
  void to_host(void* h, const void* d, size_t n) override { time("to_host", [&] { in_.to_host(h, d, n); }); }
  void from_host(void* d, const void* h, size_t n) override { time("from_host", [&] { in_.from_host(d, h, n); }); }
  void fill(float* p, float v, size_t n) override { time("fill", [&] { in_.fill(p, v, n); }); }
  void synchronize() override { in_.synchronize(); }
  void gemm(bool ta, bool tb, int M, int N, int K, float al, const float* A, int lda, const float* B, int ldb,
            float be, float* C, int ldc) override {
    time("gemm", [&] { in_.gemm(ta, tb, M, N, K, al, A, lda, B, ldb, be, C, ldc); });
  }
  void gemm_batched(bool ta, bool tb, int M, int N, int K, float al, const float* A, int lda, long sa,
                    const float* B, int ldb, long sb, float be, float* C, int ldc, long sc, int batch) override {
    time("gemm_batched", [&] { in_.gemm_batched(ta, tb, M, N, K, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc, batch); });
  }
  void linear_fwd(float* y, const float* x, const float* w, const float* b, int N, int n_out, int n_in, float be,
                  float* act) override {
    time("linear_fwd", [&] { in_.linear_fwd(y, x, w, b, N, n_out, n_in, be, act); });
  }
  void linear_bwd_input_gelu(float* dx, const float* dy, const float* w, const float* g, int N, int n_out,
                             int n_in) override {
    time("linear_bwd_input_gelu", [&] { in_.linear_bwd_input_gelu(dx, dy, w, g, N, n_out, n_in); });
  }
  void linear_fwd_group(const pentad::LinearPart* p, int n, const float* x, int N, int n_in) override {
    time("linear_fwd_group", [&] { in_.linear_fwd_group(p, n, x, N, n_in); });
  }
  void linear_bwd_input_group(float* dx, const pentad::LinearGradPart* p, int n, int N, int n_in,
                              float be) override {
    time("linear_bwd_input_group", [&] { in_.linear_bwd_input_group(dx, p, n, N, n_in, be); });
  }
  void linear_bwd_weight_group(const pentad::LinearGradPart* p, int n, const float* x, int N, int n_in) override {
    time("linear_bwd_weight_group", [&] { in_.linear_bwd_weight_group(p, n, x, N, n_in); });
  }
  size_t epilogues_fused() const override { return in_.epilogues_fused(); }
  size_t epilogues_unfused() const override { return in_.epilogues_unfused(); }
  size_t attention_fused() const override { return in_.attention_fused(); }
  size_t linear_groups_batched() const override { return in_.linear_groups_batched(); }
  void add(float* o, const float* a, const float* b, size_t n) override { time("add", [&] { in_.add(o, a, b, n); }); }
  void scale(float* x, float s, size_t n) override { time("scale", [&] { in_.scale(x, s, n); }); }
  double sum_squares(const float* x, size_t n) override {
    double r = 0;
    time("sum_squares", [&] { r = in_.sum_squares(x, n); });
    return r;
  }
  void bias_add(float* x, const float* b, int N, int C) override { time("bias_add", [&] { in_.bias_add(x, b, N, C); }); }
  void bias_bwd(float* db, const float* g, int N, int C) override { time("bias_bwd", [&] { in_.bias_bwd(db, g, N, C); }); }
  void layernorm_fwd(float* o, float* m, float* r, const float* x, const float* w, const float* b, int N, int C,
                     float eps) override {
    time("layernorm_fwd", [&] { in_.layernorm_fwd(o, m, r, x, w, b, N, C, eps); });
  }
  void layernorm_bwd(float* dx, float* dw, float* db, const float* g, const float* x, const float* w,
                     const float* m, const float* r, int N, int C) override {
    time("layernorm_bwd", [&] { in_.layernorm_bwd(dx, dw, db, g, x, w, m, r, N, C); });
  }
  void rmsnorm_fwd(float* o, float* r, const float* x, const float* w, int N, int C, float eps,
                   float w_offset) override {
    time("rmsnorm_fwd", [&] { in_.rmsnorm_fwd(o, r, x, w, N, C, eps, w_offset); });
  }
  void rmsnorm_bwd(float* dx, float* dw, const float* g, const float* x, const float* w, const float* r, int N,
                   int C, float w_offset) override {
    time("rmsnorm_bwd", [&] { in_.rmsnorm_bwd(dx, dw, g, x, w, r, N, C, w_offset); });
  }
  void gelu_fwd(float* o, const float* x, size_t n) override { time("gelu_fwd", [&] { in_.gelu_fwd(o, x, n); }); }
  void gelu_bwd(float* dx, const float* g, const float* x, size_t n) override {
    time("gelu_bwd", [&] { in_.gelu_bwd(dx, g, x, n); });
  }
  void glu_fwd(float* o, const float* g, const float* u, size_t n, GateAct a) override {
    time("glu_fwd", [&] { in_.glu_fwd(o, g, u, n, a); });
  }
  void glu_bwd(float* dg, float* du, const float* d, const float* g, const float* u, size_t n, GateAct a) override {
    time("glu_bwd", [&] { in_.glu_bwd(dg, du, d, g, u, n, a); });
  }
  void rope_fwd(float* x, int B, int T, int H, int D, int p, const Rope& r) override {
    time("rope_fwd", [&] { in_.rope_fwd(x, B, T, H, D, p, r); });
  }
  void rope_bwd(float* x, int B, int T, int H, int D, int p, const Rope& r) override {
    time("rope_bwd", [&] { in_.rope_bwd(x, B, T, H, D, p, r); });
  }
  void embedding_fwd(float* o, const int32_t* t, const float* wte, const float* wpe, int B, int T, int C, int vs,
                     int V, int p) override {
    time("embedding_fwd", [&] { in_.embedding_fwd(o, t, wte, wpe, B, T, C, vs, V, p); });
  }
  void embedding_bwd(float* dwte, float* dwpe, const float* g, const int32_t* t, int B, int T, int C, int vs,
                     int V, int p) override {
    time("embedding_bwd", [&] { in_.embedding_bwd(dwte, dwpe, g, t, B, T, C, vs, V, p); });
  }
  void gather_rows(float* d, const float* s, const int32_t* i, int M, int C) override {
    time("gather_rows", [&] { in_.gather_rows(d, s, i, M, C); });
  }
  void combine_rows(float* o, const float* s, const int32_t* r, const float* w, int N, int k, int C) override {
    time("combine_rows", [&] { in_.combine_rows(o, s, r, w, N, k, C); });
  }
  void combine_rows_bwd(float* ds, float* dw, const float* dy, const float* y, const int32_t* t, const int32_t* c,
                        const float* w, int M, int C) override {
    time("combine_rows_bwd", [&] { in_.combine_rows_bwd(ds, dw, dy, y, t, c, w, M, C); });
  }
  void attention_fwd(float* o, float* l, float* pr, const float* q, const float* k, const float* v, int B,
                     int Tq, int Tk, int H, int Hkv, int D, int qo, int ko, bool c) override {
    time("attention_fwd", [&] { in_.attention_fwd(o, l, pr, q, k, v, B, Tq, Tk, H, Hkv, D, qo, ko, c); });
  }
  void attention_bwd(float* dq, float* dk, float* dv, const float* g, const float* o, const float* l,
                     const float* pr, const float* q, const float* k, const float* v, int B, int Tq, int Tk,
                     int H, int Hkv, int D, int qo, int ko, bool c) override {
    time("attention_bwd", [&] { in_.attention_bwd(dq, dk, dv, g, o, l, pr, q, k, v, B, Tq, Tk, H, Hkv, D, qo, ko, c); });
  }
  void xent_rowmax(float* r, const float* l, int N, int V, int ld) override {
    time("xent", [&] { in_.xent_rowmax(r, l, N, V, ld); });
  }
  void xent_sumexp(float* s, float* t, const float* l, const float* r, const int32_t* tg, int N, int V,
                   int ld, int vs) override {
    time("xent", [&] { in_.xent_sumexp(s, t, l, r, tg, N, V, ld, vs); });
  }
  void xent_bwd(float* dl, float* ls, const float* l, const float* r, const float* s, const float* t,
                const int32_t* tg, float gs, int N, int V, int ld, int vs) override {
    time("xent", [&] { in_.xent_bwd(dl, ls, l, r, s, t, tg, gs, N, V, ld, vs); });
  }
  void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1, float b2, float eps,
             float wd, float gs, int step) override {
    time("adamw", [&] { in_.adamw(p, g, m, v, n, lr, b1, b2, eps, wd, gs, step); });
  }

 private:
  template <class F>
  void time(const char* op, F f) {
    if (!on) return f();
    in_.synchronize();
    const auto t0 = Clock::now();
    f();
    in_.synchronize();
    auto& [calls, secs] = totals[op];
    ++calls;
    secs += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  Backend& in_;
};

struct Args {
  std::string shape = "all", dtype = "bf16", recompute = "none", weight_copies = "on", bf16_acts = "on";
  int batch = 0, steps = 10;
};

int run_shape(const Shape& s, const Args& a, Backend& gpu) {
  TimedBackend be(gpu);
  gpu.set_compute_dtype(a.dtype == "bf16" ? pentad::Dtype::bf16 : pentad::Dtype::fp32);
  gpu.set_weight_copies(a.weight_copies == "on");
  gpu.set_bf16_activations(a.bf16_acts == "on");
  const pentad::Recompute rc = a.recompute == "full"        ? pentad::Recompute::full
                               : a.recompute == "selective" ? pentad::Recompute::selective
                                                            : pentad::Recompute::none;
  const int B = a.batch > 0 ? a.batch : s.batch, T = s.m.seq_len;
  pentad::Model model(s.m, rc, B, be);
  model.params().allocate_and_init(1);
  pentad::TrainConfig tc;
  pentad::AdamW opt(model.params(), be, tc);
  const size_t n = size_t(B) * T;
  std::vector<int32_t> in(n), tg(n);
  const pentad::CounterRng rng{7, 7};
  for (size_t i = 0; i < n; ++i) {
    in[i] = int32_t(rng.u64(2 * i) % uint64_t(s.m.vocab_size));
    tg[i] = int32_t(rng.u64(2 * i + 1) % uint64_t(s.m.vocab_size));
  }
  int step = 0;
  auto train_step = [&] {
    model.params().zero_grads();
    model.forward_backward(in.data(), tg.data(), float(1.0 / double(n)));
    const double norm = std::sqrt(be.sum_squares(model.params().grads(), model.params().numel()));
    opt.step(++step, 1e-4f, pentad::clip_scale(norm, 1.0f));
  };
  for (int w = 0; w < 2; ++w) train_step();  // warm-up (cuBLAS heuristics, allocations)
  gpu.synchronize();
  std::vector<double> times;
  for (int i = 0; i < a.steps; ++i) {
    const auto t0 = Clock::now();
    train_step();
    gpu.synchronize();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const double n_params = double(model.params().global_numel());
  const double fpt = pentad::flops_per_token(s.m, n_params);
  const double std_fpt = pentad::standard_flops_per_token(s.m, n_params);
  const double tok_s = double(n) / median, tflops = tok_s * fpt / 1e12;
  std::printf("%-10s %7.1fM params | B=%d T=%d %s recompute=%s weight copies %s bf16 MLP activation %s | median step %8.2f ms | %10.0f tok/s | "
              "%7.1f TFLOP/s | MFU %5.1f%% (pentad: 6N + 12LCT) | MFU %5.1f%% (standard: 6N_non-emb + 6LCT, "
              "causal) | peak tracked memory %.2f GiB | GEMM epilogues fused %zu, unfused %zu | "
              "fused attention calls %zu | batched linear groups %zu\n",
              s.name, n_params / 1e6, B, T, a.dtype.c_str(), a.recompute.c_str(),
              gpu.keeps_weight_copies() ? "on" : "off", gpu.keeps_bf16_activations() ? "on" : "off", median * 1e3,
              tok_s,
              tflops, 100.0 * tflops / kPeakTflops, 100.0 * tok_s * std_fpt / 1e12 / kPeakTflops,
              double(gpu.mem_stats().total_peak_bytes) / (1 << 30), gpu.epilogues_fused(), gpu.epilogues_unfused(),
              gpu.attention_fused(), gpu.linear_groups_batched());
  // Per-op times of one step, each call synchronised.
  be.on = true;
  train_step();
  be.on = false;
  double total = 0;
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [op, ct] : be.totals) {
    total += ct.second;
    rows.emplace_back(ct.second, op);
  }
  std::sort(rows.rbegin(), rows.rend());
  std::printf("  per-op times of one synchronised step (%.2f ms in ops):\n", total * 1e3);
  for (const auto& [secs, op] : rows)
    std::printf("    %-16s %6d calls %9.3f ms %5.1f%%\n", op.c_str(), be.totals[op].first, secs * 1e3,
                100 * secs / total);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) {
      std::fprintf(stderr, "cuda_mfu: %s needs a value\n", k.c_str());
      return 2;
    }
    if (k == "--shape") a.shape = v;
    else if (k == "--batch") a.batch = std::atoi(v);
    else if (k == "--steps") a.steps = std::max(1, std::atoi(v));
    else if (k == "--dtype") a.dtype = v;
    else if (k == "--recompute") a.recompute = v;
    else if (k == "--weight-copies" || k == "--bf16-activations") {
      (k == "--weight-copies" ? a.weight_copies : a.bf16_acts) = v;
      if (std::string(v) != "on" && std::string(v) != "off") {
        std::fprintf(stderr, "cuda_mfu: %s %s: expected on or off\n", k.c_str(), v);
        return 2;
      }
    }
    else {
      std::fprintf(stderr, "cuda_mfu: unknown option %s\n", k.c_str());
      return 2;
    }
    ++i;
  }
  std::string why;
  if (!pentad::cuda_device_available(&why)) {
    std::fprintf(stderr, "cuda_mfu: no GPU: %s\n", why.c_str());
    return 77;
  }
  auto gpu = pentad::make_cuda_backend(0);
  const std::vector<Shape> shapes = pentad::gpu_bench_shapes();
  std::printf("cuda_mfu: MFU against %.0f TFLOP/s dense BF16 (H100/H200), two ways: pentad 6N + 12*L*C*T, standard 6*N_non-embedding + 6*L*C*T (causal)\n",
              kPeakTflops);
  bool any = false;
  for (const Shape& s : shapes) {
    if (a.shape != "all" && a.shape != s.name) continue;
    any = true;
    run_shape(s, a, *gpu);
  }
  if (!any) {
    std::fprintf(stderr, "cuda_mfu: unknown shape %s\n", a.shape.c_str());
    return 2;
  }
  return 0;
}
