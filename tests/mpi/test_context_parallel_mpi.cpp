// Context parallelism against the single-rank computation on the same rank:
// the whole job is one cp group (2 or 4 ranks); every rank also runs the
// serial reference on the full sequences. Checks
//  * the index math: chunk positions (against the definition: zig-zag rank r
//    holds chunks r and 2cp-1-r of 2cp), cp_slice/cp_unslice, the causal
//    pair count (against brute force) and the zig-zag balance (max/min <= 1.05,
//    while contiguous is clearly unbalanced, so the measure can fail);
//  * ring attention, contiguous and zig-zag, MHA and GQA (Hkv < H): forward
//    output and log-sum-exp, and dq, dk, dv, against the serial kernel;
//    its reported FLOPs against the brute-force count of visible pairs;
//  * one forward/backward of the model (gpt2 and llama, every recompute
//    policy): loss, logits and every parameter gradient (summed over cp).
// Tolerance: |a - b| <= 1e-5 * max|b| + 1e-4 * |b| (fp32, reordered sums).
// GTest on every rank (tests/lib/gtest_mpi_main.cpp); the 4-rank ctest runs
// the model with recompute none only (--gtest_filter).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "cpu.hpp"
#include "backend/backend.hpp"
#include "../lib/device_buffers.hpp"
#include "../lib/cp_rows.hpp"
#include "../lib/job_group.hpp"
#include "../lib/mpi_checks.hpp"
#include "comm/comm.hpp"
#include "parallel/cp/context_parallel.hpp"
#include "model/model.hpp"
#include "model/params.hpp"

using namespace pentad;
using pentad::test::dev_of;
using pentad::test::host_of;
using pentad::test::expect;
using pentad::test::expect_close;
using pentad::test::job_rank;
using pentad::test::slice_rows;
using pentad::test::start_of;

namespace {

double max_rel(const std::vector<float>& got, const std::vector<float>& ref) {
  double ref_max = 0, d = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ref_max = std::max(ref_max, double(std::fabs(ref[i])));
    d = std::max(d, std::fabs(double(got[i]) - ref[i]));
  }
  return ref_max > 0 ? d / ref_max : d;
}

// Every rank's chunk-major rows -> global (B, T, W) (all-gather over the group).
std::vector<float> unslice_rows(const std::vector<float>& local, bool zigzag, int B, int T, int W, MPI_Comm comm) {
  int cp = 1;
  MPI_Comm_size(comm, &cp);
  const int nc = zigzag ? 2 : 1, m = T / (cp * nc);
  std::vector<float> all(local.size() * size_t(cp)), g(size_t(B) * T * W);
  MPI_Allgather(local.data(), int(local.size()), MPI_FLOAT, all.data(), int(local.size()), MPI_FLOAT, comm);
  for (int r = 0; r < cp; ++r)
    for (int c = 0; c < nc; ++c)
      for (int b = 0; b < B; ++b)
        std::copy_n(all.data() + r * local.size() + (size_t(c) * B + b) * m * W, size_t(m) * W,
                    g.data() + (size_t(b) * T + start_of(zigzag, T, cp, r, c)) * W);
  return g;
}

// lse (B, H, T) handled as rows of width 1 per (b, h): transpose to (B, T, H) and back.
std::vector<float> bth(const std::vector<float>& bht, int B, int H, int T) {
  std::vector<float> o(bht.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) o[(size_t(b) * T + t) * H + h] = bht[(size_t(b) * H + h) * T + t];
  return o;
}

std::vector<float> wave(size_t n, double f, double amp) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(amp * std::sin(f * double(i) + 0.3));
  return v;
}

void test_index_math(int cp) {
  for (bool zz : {false, true}) {
    const int T = 40 * cp;
    const CpSplit s{T, cp, zz ? CpLayout::zigzag : CpLayout::contiguous};
    bool ok = true;
    std::vector<int> seen(size_t(T), 0);
    for (int r = 0; r < cp; ++r) {
      int64_t pairs = 0;
      for (int c = 0; c < s.n_chunks(); ++c) {
        ok = ok && s.chunk_start(r, c) == start_of(zz, T, cp, r, c);
        for (int i = 0; i < s.chunk_len(); ++i) {
          const int p = s.chunk_start(r, c) + i;
          ++seen[size_t(p)];
          pairs += p + 1;  // brute force: keys 0..p
        }
      }
      ok = ok && pairs == s.causal_pairs(r);
    }
    for (int n : seen) ok = ok && n == 1;  // every position held by exactly one rank
    // cp_slice against the test's slicing, cp_unslice back to the global rows.
    const int n_mb = 2, n_seq = 3;
    std::vector<int32_t> tok(size_t(n_mb) * n_seq * T);
    for (size_t i = 0; i < tok.size(); ++i) tok[i] = int32_t(i * 7 % 1000);
    std::vector<float> all;
    for (int r = 0; r < cp; ++r) {
      std::vector<int32_t> loc(tok.size() / size_t(cp));
      cp_slice(s, r, tok.data(), n_mb, n_seq, loc.data());
      for (int mb = 0; mb < n_mb; ++mb) {
        std::vector<float> g(tok.begin() + mb * n_seq * T, tok.begin() + (mb + 1) * n_seq * T);
        const std::vector<float> want = slice_rows(g, zz, n_seq, T, 1, cp, r);
        for (size_t i = 0; i < want.size(); ++i) ok = ok && float(loc[mb * want.size() + i]) == want[i];
      }
      for (int32_t t : loc) all.push_back(float(t));
    }
    std::vector<float> back(tok.size());
    cp_unslice(s, all.data(), n_mb, n_seq, 1, back.data());
    for (size_t i = 0; i < tok.size(); ++i) ok = ok && back[i] == float(tok[i]);
    expect(ok, std::string(zz ? "zigzag" : "contiguous") + " cp=" + std::to_string(cp) +
                   ": chunk positions, causal pair counts, cp_slice/cp_unslice");
  }
  // Balance of causal work at a long sequence (pure index math).
  for (bool zz : {false, true}) {
    const CpSplit s{8192, cp, zz ? CpLayout::zigzag : CpLayout::contiguous};
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
    for (int r = 0; r < cp; ++r) {
      lo = std::min(lo, s.causal_pairs(r));
      hi = std::max(hi, s.causal_pairs(r));
    }
    const double ratio = double(hi) / double(lo);
    // zig-zag must be balanced; contiguous must not be (else the measure is vacuous).
    const bool ok = zz ? ratio <= 1.05 : ratio > 1.5;
    if (job_rank() == 0) std::printf("     causal work per rank, T=8192 cp=%d %s: max/min %.4f\n", cp, zz ? "zigzag" : "contiguous", ratio);
    expect(ok, std::string("causal work balance ") + (zz ? "zigzag <= 1.05" : "contiguous > 1.5"));
  }
}

void test_merge_default(Backend& be) {
  // The host fallback of attention_merge (for backends without their own) against the CPU one.
  const int B = 2, T = 5, H = 3, D = 4;
  std::vector<float> o = wave(size_t(B) * T * H * D, 0.7, 1.0), op = wave(o.size(), 1.3, 2.0);
  std::vector<float> l = wave(size_t(B) * H * T, 0.9, 3.0), lp = wave(l.size(), 0.4, 3.0);
  l[2] = -std::numeric_limits<float>::infinity();
  lp[2] = -std::numeric_limits<float>::infinity();  // fully masked in both
  lp[3] = -std::numeric_limits<float>::infinity();  // masked in the part only
  float *o1 = dev_of(be, o), *l1 = dev_of(be, l), *o2 = dev_of(be, o), *l2 = dev_of(be, l);
  float *dop = dev_of(be, op), *dlp = dev_of(be, lp);
  be.attention_merge(o1, l1, dop, dlp, B, T, H, D);
  be.Backend::attention_merge(o2, l2, dop, dlp, B, T, H, D);
  const auto a = host_of(be, o1, o.size()), b = host_of(be, o2, o.size());
  const auto la = host_of(be, l1, l.size()), lb = host_of(be, l2, l.size());
  // Not bitwise: the CPU backend is built with -march=native (fused multiply-adds).
  expect_close("attention_merge: host fallback vs the CPU backend, out", a, b);
  expect_close("attention_merge: host fallback vs the CPU backend, lse", la, lb);
  bool ok = std::isinf(la[2]) && la[3] == l[3];
  for (float x : a) ok = ok && std::isfinite(x);
  expect(ok, "attention_merge: a row masked in both stays -inf, one masked in the part keeps its lse; no NaN");
  for (float* p : {o1, l1, o2, l2, dop, dlp}) be.free_bytes(p);
}

void test_ring(Backend& be, Comm& cp, bool zz, int H, int Hkv) {
  const int B = 2, T = 72 * cp.size(), D = 8, P = cp.size(), r = cp.rank();
  const std::string tag = std::string(zz ? "zigzag" : "contiguous") + " cp=" + std::to_string(P) +
                          " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv) + ": ";
  const size_t nq = size_t(B) * T * H * D, nk = size_t(B) * T * Hkv * D;
  const std::vector<float> q = wave(nq, 0.37, 1.5), k = wave(nk, 0.53, 1.5), v = wave(nk, 0.29, 1.0);
  const std::vector<float> dout = wave(nq, 0.71, 0.5);
  // Serial reference on the whole sequences.
  float *dq_ = dev_of(be, q), *dk_ = dev_of(be, k), *dv_ = dev_of(be, v), *ddo = dev_of(be, dout);
  float* out = be.alloc(nq, Mem::scratch);
  float* lse = be.alloc(size_t(B) * H * T, Mem::scratch);
  float* gq = be.alloc(nq, Mem::scratch);
  float* gk = be.alloc(nk, Mem::scratch);
  float* gv = be.alloc(nk, Mem::scratch);
  be.attention_fwd(out, lse, nullptr, dq_, dk_, dv_, B, T, T, H, Hkv, D, 0, 0, true);
  be.attention_bwd(gq, gk, gv, ddo, out, lse, nullptr, dq_, dk_, dv_, B, T, T, H, Hkv, D, 0, 0, true);
  const auto ref_out = host_of(be, out, nq), ref_lse = bth(host_of(be, lse, size_t(B) * H * T), B, H, T);
  const auto ref_dq = host_of(be, gq, nq), ref_dk = host_of(be, gk, nk), ref_dv = host_of(be, gv, nk);
  for (float* p : {dq_, dk_, dv_, ddo, out, lse, gq, gk, gv}) be.free_bytes(p);

  // This rank's chunks, ring attention over the group.
  const CpSplit split{T, P, zz ? CpLayout::zigzag : CpLayout::contiguous};
  const int Tl = T / P, nc = split.n_chunks(), m = split.chunk_len();
  float* lq = dev_of(be, slice_rows(q, zz, B, T, H * D, P, r));
  float* lk = dev_of(be, slice_rows(k, zz, B, T, Hkv * D, P, r));
  float* lv = dev_of(be, slice_rows(v, zz, B, T, Hkv * D, P, r));
  float* ldo = dev_of(be, slice_rows(dout, zz, B, T, H * D, P, r));
  float* lo = be.alloc(size_t(B) * Tl * H * D, Mem::scratch);
  float* llse = be.alloc(size_t(B) * H * Tl, Mem::scratch);
  float* lgq = be.alloc(size_t(B) * Tl * H * D, Mem::scratch);
  float* lgk = be.alloc(size_t(B) * Tl * Hkv * D, Mem::scratch);
  float* lgv = be.alloc(size_t(B) * Tl * Hkv * D, Mem::scratch);
  RingAttention ring(be, cp, split, B, H, Hkv, D);
  cp.reset_bytes();
  ring.forward(lo, llse, lq, lk, lv);
  const double fwd_flops = ring.flops(), fwd_bytes = cp.bytes_sent();
  ring.backward(lgq, lgk, lgv, ldo, lo, llse, lq, lk, lv);
  {
    // Ring traffic: forward passes K and V on P-1 times; backward passes them
    // on P-1 times and the dK/dV accumulator P times (back to its owner).
    const double kv_bytes = 2.0 * B * Tl * Hkv * D * sizeof(float);
    const double want_fwd = (P - 1) * kv_bytes, want_bwd = (P - 1) * kv_bytes + P * kv_bytes;
    expect(fwd_bytes == want_fwd && cp.bytes_sent() - fwd_bytes == want_bwd,
           tag + "cp bytes: forward " + std::to_string(fwd_bytes) + " (formula " + std::to_string(want_fwd) +
               "), backward " + std::to_string(cp.bytes_sent() - fwd_bytes) + " (formula " +
               std::to_string(want_bwd) + ")");
  }
  // lse (nc, B, H, m) -> rows (nc, B, m, H) for the row unslicer.
  std::vector<float> lse_rows(size_t(B) * Tl * H);
  const auto lse_h = host_of(be, llse, lse_rows.size());
  for (int c = 0; c < nc; ++c)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int t = 0; t < m; ++t)
          lse_rows[((size_t(c) * B + b) * m + t) * H + h] = lse_h[((size_t(c) * B + b) * H + h) * m + t];
  MPI_Comm g = cp.mpi();
  expect_close(tag + "out", unslice_rows(host_of(be, lo, size_t(B) * Tl * H * D), zz, B, T, H * D, g), ref_out);
  expect_close(tag + "lse", unslice_rows(lse_rows, zz, B, T, H, g), ref_lse);
  expect_close(tag + "dq", unslice_rows(host_of(be, lgq, size_t(B) * Tl * H * D), zz, B, T, H * D, g), ref_dq);
  expect_close(tag + "dk", unslice_rows(host_of(be, lgk, size_t(B) * Tl * Hkv * D), zz, B, T, Hkv * D, g), ref_dk);
  expect_close(tag + "dv", unslice_rows(host_of(be, lgv, size_t(B) * Tl * Hkv * D), zz, B, T, Hkv * D, g), ref_dv);

  // FLOPs: exactly the visible pairs of this rank's queries (brute force).
  double pairs = 0;
  for (int c = 0; c < nc; ++c)
    for (int i = 0; i < m; ++i) pairs += start_of(zz, T, P, r, c) + i + 1;
  const double want_fwd = 4.0 * D * H * B * pairs, want_all = want_fwd + 10.0 * D * H * B * pairs;
  bool ok = fwd_flops == want_fwd && ring.flops() == want_all;
  int all_ok = ok;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, g);
  expect(all_ok, tag + "reported FLOPs = visible (query, key) pairs on every rank");
  // Balance of the runtime's reported work over the ranks.
  double lo_f = ring.flops(), hi_f = ring.flops();
  MPI_Allreduce(MPI_IN_PLACE, &lo_f, 1, MPI_DOUBLE, MPI_MIN, g);
  MPI_Allreduce(MPI_IN_PLACE, &hi_f, 1, MPI_DOUBLE, MPI_MAX, g);
  if (job_rank() == 0) std::printf("     %sreported attention FLOPs per rank max/min %.4f\n", tag.c_str(), hi_f / lo_f);
  if (zz) expect(hi_f / lo_f <= 1.05, tag + "reported FLOPs balanced (max/min <= 1.05)");
  for (float* p : {lq, lk, lv, ldo, lo, llse, lgq, lgk, lgv}) be.free_bytes(p);
}

// mask_first: every target of the first T/cp positions is ignored, so with the
// contiguous layout cp rank 0 has no token that counts (no NaN allowed).
void test_model(Backend& be, Comm& cp, Family family, bool zz, Recompute rc, bool mask_first = false) {
  ModelConfig mc;
  mc.family = family;
  mc.n_layers = 2;
  mc.d_model = 32;
  mc.n_heads = 4;
  mc.n_kv_heads = family == Family::llama ? 2 : 4;
  mc.d_ff = family == Family::llama ? 96 : 128;
  mc.vocab_size = 64;
  mc.seq_len = 8 * cp.size();
  mc.tied_embeddings = family == Family::gpt2 ? 1 : 0;
  const int B = 2, T = mc.seq_len, N = B * T, P = cp.size(), r = cp.rank();
  const std::string tag = std::string(family == Family::gpt2 ? "gpt2 " : "llama ") +
                          (zz ? "zigzag" : "contiguous") + " recompute " + std::to_string(int(rc)) +
                          (mask_first ? " rank 0 all masked" : "") + ": ";
  std::vector<int32_t> in(static_cast<size_t>(N)), tg(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) {
    in[size_t(i)] = (i * 13 + 5) % mc.vocab_size;
    tg[size_t(i)] = i % 11 == 4 ? -1 : (i * 29 + 3) % mc.vocab_size;  // some ignored targets
    if (mask_first && i % T < T / P) tg[size_t(i)] = -1;
  }
  const float scale = 1.0f / float(N);
  std::vector<float> logits_ref(size_t(N) * mc.vocab_size);
  Model serial(mc, rc, B, be);
  serial.params().allocate_and_init(1234);
  const double loss_ref = serial.forward_backward(in.data(), tg.data(), scale, logits_ref.data());

  const CpLayout layout = zz ? CpLayout::zigzag : CpLayout::contiguous;
  const CpSplit split{T, P, layout};
  std::vector<int32_t> lin(size_t(N / P)), ltg(size_t(N / P));
  cp_slice(split, r, in.data(), 1, B, lin.data());
  cp_slice(split, r, tg.data(), 1, B, ltg.data());
  ModelParallel mp;
  mp.cp = &cp;
  mp.cp_layout = layout;
  Model par(mc, rc, B, be, mp);
  par.params().allocate_and_init(1234);
  std::vector<float> logits_loc(size_t(N / P) * mc.vocab_size);
  double loss = par.forward_backward(lin.data(), ltg.data(), scale, logits_loc.data());
  if (mask_first) {
    int ok = std::isfinite(loss) && (r != 0 || loss == 0.0);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, cp.mpi());
    expect(ok, tag + "every rank's loss sum is finite, the fully masked rank's is 0");
  }
  cp.allreduce_sum_host(&loss, 1);
  expect_close(tag + "loss", {float(loss)}, {float(loss_ref)});
  std::vector<float> all(logits_loc.size() * size_t(P)), logits(logits_ref.size());
  MPI_Allgather(logits_loc.data(), int(logits_loc.size()), MPI_FLOAT, all.data(), int(logits_loc.size()),
                MPI_FLOAT, cp.mpi());
  cp_unslice(split, all.data(), 1, B, mc.vocab_size, logits.data());
  expect_close(tag + "logits", logits, logits_ref);
  double eval = par.forward_loss(lin.data(), ltg.data());
  cp.allreduce_sum_host(&eval, 1);
  expect_close(tag + "eval loss", {float(eval)}, {float(loss_ref)});
  ParamStore& ps = par.params();
  ParamStore& ss = serial.params();
  double worst_rel = 0;  // worst |diff| / max|ref| over the gradients, printed once
  for (int i = 0; i < int(ps.infos().size()); ++i) {
    const ParamInfo& p = ps.info(i);
    std::vector<float> gr = host_of(be, ps.grad(i), p.numel());
    MPI_Allreduce(MPI_IN_PLACE, gr.data(), int(gr.size()), MPI_FLOAT, MPI_SUM, cp.mpi());  // dp x cp reduction
    if (p.name.ends_with("attn/bk")) {
      // Zero in exact arithmetic (softmax ignores a per-row shift of the scores).
      double mx = 0;
      for (float x : gr) mx = std::max(mx, double(std::fabs(x)));
      expect(mx <= 1e-8, tag + "grad " + p.name + " negligible");
    } else {
      expect_close(tag + "grad " + p.name, gr, host_of(be, ss.grad(ss.find(p.name)), p.numel()));
      worst_rel = std::max(worst_rel, max_rel(gr, host_of(be, ss.grad(ss.find(p.name)), p.numel())));
    }
  }
  if (job_rank() == 0)
    std::printf("     %s%d gradients: worst max|diff|/max|ref| %.3e\n", tag.c_str(), int(ps.infos().size()), worst_rel);
}

pentad::test::JobGroup& job = pentad::test::job_group("cp");

const char* rc_name(Recompute rc) {
  const char* names[] = {"none", "selective", "full"};
  return names[int(rc)];
}

TEST(ContextParallel, IndexMath) { test_index_math(job.comm().size()); }

TEST(ContextParallel, AttentionMergeHostFallback) { test_merge_default(job.be()); }

// One ring hop through Comm::isendrecv (the ring attention's transfers):
// every rank sends its block on to the next and receives the previous
// rank's, two hops in flight at once (the backward's K/V and dK/dV rings),
// and the send is counted in the group's bytes.
TEST(ContextParallel, ExchangeIsOneRingHop) {
  Comm& cp = job.comm();
  Backend& be = job.be();
  const int P = cp.size(), r = cp.rank(), next = (r + 1) % P, prev = (r + P - 1) % P;
  const size_t n = 5;
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = float(100 * r + int(i));
    b[i] = float(-100 * r - int(i));
  }
  float *sa = be.alloc(n, Mem::scratch), *sb = be.alloc(n, Mem::scratch), *ra = be.alloc(n, Mem::scratch),
        *rb = be.alloc(n, Mem::scratch);
  be.from_host(sa, a.data(), n * sizeof(float));
  be.from_host(sb, b.data(), n * sizeof(float));
  be.fill(ra, 0.0f, n);
  be.fill(rb, 0.0f, n);
  cp.reset_bytes();
  const Comm::Exchange x = cp.isendrecv(sa, ra, n, next, prev, 1);
  const Comm::Exchange y = cp.isendrecv(sb, rb, n, next, prev, 2);
  cp.wait_exchange(y);
  cp.wait_exchange(x);
  EXPECT_DOUBLE_EQ(cp.bytes_sent(), 2.0 * n * sizeof(float));
  std::vector<float> got_a(n), got_b(n);
  be.to_host(got_a.data(), ra, n * sizeof(float));
  be.to_host(got_b.data(), rb, n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(got_a[i], float(100 * prev + int(i))) << "element " << i;
    EXPECT_EQ(got_b[i], float(-100 * prev - int(i))) << "element " << i;
  }
  for (float* p : {sa, sb, ra, rb}) be.free_bytes(p);
}

struct RingCase {
  bool zz;
  int H, Hkv;
};

class RingAttention : public ::testing::TestWithParam<RingCase> {};

TEST_P(RingAttention, MatchesSerial) {
  const RingCase& c = GetParam();
  test_ring(job.be(), job.comm(), c.zz, c.H, c.Hkv);
}

INSTANTIATE_TEST_SUITE_P(Layouts, RingAttention,
                         ::testing::Values(RingCase{false, 4, 4}, RingCase{false, 4, 2}, RingCase{false, 6, 2},
                                           RingCase{true, 4, 4}, RingCase{true, 4, 2}, RingCase{true, 6, 2}),
                         [](const ::testing::TestParamInfo<RingCase>& i) {
                           return std::string(i.param.zz ? "zigzag" : "contiguous") + "_H" +
                                  std::to_string(i.param.H) + "_Hkv" + std::to_string(i.param.Hkv);
                         });

struct ModelCase {
  Family family;
  bool zz;
  Recompute rc;
};

std::vector<ModelCase> model_cases() {
  std::vector<ModelCase> v;
  for (Family f : {Family::gpt2, Family::llama})
    for (bool zz : {false, true})
      for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) v.push_back({f, zz, rc});
  return v;
}

class ContextParallelModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ContextParallelModel, MatchesSerial) {
  const ModelCase& c = GetParam();
  test_model(job.be(), job.comm(), c.family, c.zz, c.rc);
}

// e.g. llama_zigzag_full
INSTANTIATE_TEST_SUITE_P(Layouts, ContextParallelModel, ::testing::ValuesIn(model_cases()),
                         [](const ::testing::TestParamInfo<ModelCase>& i) {
                           return std::string(i.param.family == Family::gpt2 ? "gpt2" : "llama") +
                                  (i.param.zz ? "_zigzag_" : "_contiguous_") + rc_name(i.param.rc);
                         });

// Runs in the quick (recompute none) selection too: it is one case.
TEST(ContextParallel, ModelWithRankZeroFullyMasked) {
  test_model(job.be(), job.comm(), Family::llama, false, Recompute::selective, /*mask_first=*/true);
}

}  // namespace
