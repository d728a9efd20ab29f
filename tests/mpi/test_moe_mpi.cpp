// The MoE layer with expert parallelism against the same layer with every
// expert on one rank. The whole job is one ep group; every rank also builds
// the serial layer (same global weights: the initial values are keyed on the
// global element index) and runs both on its own tokens. Checks, per rank:
//  * the layer output and the gradient of its input and of the router equal
//    the serial layer's on the same tokens;
//  * each rank's expert gradients equal the sum over ranks (all-reduce) of
//    the serial layers' gradients of those experts: the ep group's ranks see
//    different tokens, as dp ranks do;
//  * routing statistics (kept tokens per expert, dropped, aux loss) agree,
//    and each rank's receive load is the rows its experts kept over N*top_k.
// Cases: plain (capacity 1.25), capacity overflow (0.25, tokens dropped),
// dropless, and a router that sends no token to half the experts (the last
// ep ranks receive nothing).
// "fd" mode: the gradients of the router and of the input by central finite
// differences of the objective sum(out * dy) + aux + z (aux and z weighted as
// in training), once with dy = 0 (the auxiliary losses alone) and once with
// all terms; fp64 accumulation of the objective, fp32 layer.
// Tolerances: layer vs layer |a - b| <= 1e-5 * max|b| + 1e-4 * |b|;
// finite differences 1e-3 * max|g| + 1e-2 * |g| (fp32 forward, h = 1e-2).
// GTest on every rank (tests/lib/gtest_mpi_main.cpp); the finite-difference
// tests (suite MoeFiniteDifferences) run as their own 1-rank ctest.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu.hpp"
#include "backend/backend.hpp"
#include "../lib/cp_rows.hpp"
#include "../lib/device_buffers.hpp"
#include "../lib/job_group.hpp"
#include "../lib/mpi_checks.hpp"
#include "comm/comm.hpp"
#include "parallel/ep/moe.hpp"
#include "model/params.hpp"

using namespace pentad;
using pentad::test::dev_of;
using pentad::test::host_of;
using pentad::test::expect;
using pentad::test::job_rank;
using pentad::test::Tol;

namespace {

// An all-zero reference would check nothing: every comparison needs one
// non-zero value (a legitimately all-zero case is compared exactly instead).
constexpr Tol kLayer{.nonzero_ref = true};
constexpr Tol kFiniteDiff{.atol = 1e-3, .rtol = 1e-2, .nonzero_ref = true};

void expect_near(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref,
                 Tol tol = kLayer) {
  pentad::test::expect_close(what, got, ref, tol);
}

}  // namespace

namespace {

ModelConfig moe_config(Family f, float cf) {
  ModelConfig mc;
  mc.family = f;
  mc.n_layers = 1;
  mc.d_model = 16;
  mc.d_ff = 24;
  mc.seq_len = 8;
  mc.n_experts = 4;
  mc.top_k = 2;
  mc.capacity_factor = cf > 0 ? cf : 1.25f;  // cf = 0: dropless
  mc.dropless = cf == 0;
  mc.aux_loss_coef = 0.5f;
  mc.z_loss_coef = 0.05f;
  return mc;
}

// One layer with its two stores, initialised from `seed`. Biases get
// non-zero values so their gradients are exercised.
struct Layer {
  ParamStore dense, experts;
  MoeLayer moe;
  MoeParams p;
  Layer(const ModelConfig& mc, Backend& be, Comm* ep, bool block_half, Comm* cp = nullptr,
        CpLayout layout = CpLayout::contiguous)
      : dense(be), experts(be), moe(mc, be, dense, experts, ep, cp, layout) {
    dense.begin_unit(0);
    experts.begin_unit(0);
    p = moe.add_params("moe/", 0.3f, 0.2f);
    dense.allocate_and_init(99);
    experts.allocate_and_init(99);
    for (int i : {p.b_up, p.b_down}) {
      if (i < 0) continue;
      const ParamInfo& t = experts.info(i);
      std::vector<float> v(t.numel());
      const size_t first = size_t(t.local_start[0]) * (v.size() / size_t(t.local_shape[0]));  // global index
      for (size_t j = 0; j < v.size(); ++j) v[j] = 0.05f * float(std::sin(0.7 * double(first + j)));
      be.from_host(experts.param(i), v.data(), v.size() * sizeof(float));
    }
    if (block_half) {
      // Experts E/2.. get a large negative router logit for tokens whose
      // features are positive (all of them, see tokens()).
      const int E = mc.n_experts, C = mc.d_model;
      std::vector<float> w = host_of(be, dense.param(p.router), size_t(E) * C);
      for (int e = E / 2; e < E; ++e)
        for (int c = 0; c < C; ++c) w[size_t(e) * C + c] = -4.0f;
      be.from_host(dense.param(p.router), w.data(), w.size() * sizeof(float));
    }
  }
};

std::vector<float> tokens(int N, int C, int salt, bool positive) {
  std::vector<float> x(size_t(N) * C);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = std::sin(0.913 * double(i) + 1.7 * salt) + 0.5 * std::cos(0.311 * double(i) * (salt + 1));
    x[i] = float(positive ? 0.5 + 0.5 * std::fabs(v) : v);
  }
  return x;
}

struct Result {
  std::vector<float> out, dx, drouter;
  std::vector<std::vector<float>> dexperts;  // per expert tensor (local block)
  std::vector<std::vector<float>> dshared;   // per shared-expert tensor (model.shared_expert_ffn)
  MoeStats stats;
};

// The shared expert's tensors (dense store; -1 where the family or the gate has none).
std::vector<int> shared_tensors(const MoeParams& p) { return {p.s_gate, p.s_up, p.s_b_up, p.s_down, p.s_b_down, p.s_w}; }

Result run(Layer& L, Backend& be, const ModelConfig& mc, const std::vector<float>& x, const std::vector<float>& dy,
           float loss_scale) {
  const int N = int(x.size()) / mc.d_model, C = mc.d_model;
  Result r;
  r.stats.reset(1, mc.n_experts);
  float* xd = dev_of(be, x);
  float* dyd = dev_of(be, dy);
  std::vector<float> zeros(x.size(), 0.0f);
  float* resid = dev_of(be, zeros);
  float* out = be.alloc(x.size(), Mem::scratch);
  float* dx = be.alloc(x.size(), Mem::scratch);
  L.dense.zero_grads();
  L.experts.zero_grads();
  MoeCtxPtr ctx;
  L.moe.forward(ctx, L.p, 0, out, resid, xd, N, &r.stats);
  L.moe.backward(ctx, L.p, dx, dyd, xd, loss_scale);
  r.out = host_of(be, out, size_t(N) * C);
  r.dx = host_of(be, dx, size_t(N) * C);
  r.drouter = host_of(be, L.dense.grad(L.p.router), L.dense.info(L.p.router).numel());
  for (int i : {L.p.w_gate, L.p.w_up, L.p.b_up, L.p.w_down, L.p.b_down})
    if (i >= 0) r.dexperts.push_back(host_of(be, L.experts.grad(i), L.experts.info(i).numel()));
  for (int i : shared_tensors(L.p))
    if (i >= 0) r.dshared.push_back(host_of(be, L.dense.grad(i), L.dense.info(i).numel()));
  for (float* p : {xd, dyd, resid, out, dx}) be.free_bytes(p);
  return r;
}

// shared_gated: with a gated shared expert, replicated over ep (its
// gradients from this rank's tokens, as the serial layer's on them).
void test_ep(Backend& be, Comm& ep, Family f, float cf, bool block_half, const std::string& name,
             bool shared_gated = false) {
  ModelConfig mc = moe_config(f, cf);
  mc.shared_expert_ffn = shared_gated ? 20 : 0;
  mc.shared_expert_gate = shared_gated;
  const int S = 3, N = S * mc.seq_len, C = mc.d_model, E = mc.n_experts, P = ep.size();
  const std::string tag = std::string(f == Family::gpt2 ? "gpt2 " : "llama ") + name + " ep=" + std::to_string(P) + ": ";
  Layer serial(mc, be, nullptr, block_half), par(mc, be, &ep, block_half);
  const std::vector<float> x = tokens(N, C, job_rank(), block_half), dy = tokens(N, C, 100 + job_rank(), false);
  const float ls = 1.0f / float(N * P);
  const Result a = run(serial, be, mc, x, dy, ls);
  const Result b = run(par, be, mc, x, dy, ls);
  expect_near(tag + "output", b.out, a.out);
  expect_near(tag + "input gradient", b.dx, a.dx);
  expect_near(tag + "router gradient", b.drouter, a.drouter);
  expect(a.stats.per_expert == b.stats.per_expert && a.stats.dropped == b.stats.dropped &&
             std::fabs(a.stats.aux_sum - b.stats.aux_sum) <= 1e-9 * std::fabs(a.stats.aux_sum),
         tag + "routing statistics");
  const int El = E / P;
  // Receive load: the rows this rank's experts got from every rank (the
  // serial kept counts summed over ranks) over N*top_k; serially every kept
  // row stays.
  {
    std::vector<double> kept = a.stats.per_expert;
    MPI_Allreduce(MPI_IN_PLACE, kept.data(), int(kept.size()), MPI_DOUBLE, MPI_SUM, ep.mpi());
    double R = 0, M = 0;
    for (int e = 0; e < E; ++e) {
      if (e / El == ep.rank()) R += kept[size_t(e)];
      M += a.stats.per_expert[size_t(e)];
    }
    const double share = double(N) * mc.top_k;
    expect(b.stats.recv_load_max == R / share, tag + "receive load " + std::to_string(b.stats.recv_load_max) +
                                                   " (expected " + std::to_string(R / share) + ")");
    expect(a.stats.recv_load_max == M / share, tag + "serial receive load");
  }
  // Expert gradients: the serial ones summed over ranks, this rank's block.
  for (size_t t = 0; t < a.dexperts.size(); ++t) {
    std::vector<float> sum = a.dexperts[t];
    MPI_Allreduce(MPI_IN_PLACE, sum.data(), int(sum.size()), MPI_FLOAT, MPI_SUM, ep.mpi());
    const size_t per = sum.size() / size_t(E);
    std::vector<float> mine(sum.begin() + long(size_t(ep.rank()) * El * per),
                            sum.begin() + long(size_t(ep.rank() + 1) * El * per));
    // A rank whose experts got no token has zero gradients: compare exactly.
    double mx = 0;
    for (float v : mine) mx = std::max(mx, double(std::fabs(v)));
    if (mx == 0)
      expect(std::all_of(b.dexperts[t].begin(), b.dexperts[t].end(), [](float v) { return v == 0; }),
             tag + "expert tensor " + std::to_string(t) + " gradient (no tokens here: zero)");
    else
      expect_near(tag + "expert tensor " + std::to_string(t) + " gradient", b.dexperts[t], mine);
  }
  expect(a.dshared.size() == b.dshared.size() && a.dshared.size() == (shared_gated ? (f == Family::gpt2 ? 5u : 4u) : 0u),
         tag + "shared-expert tensors");
  for (size_t t = 0; t < a.dshared.size() && t < b.dshared.size(); ++t)
    expect_near(tag + "shared-expert tensor " + std::to_string(t) + " gradient", b.dshared[t], a.dshared[t]);
  // The case must exercise what it claims.
  double dropped = a.stats.dropped;
  MPI_Allreduce(MPI_IN_PLACE, &dropped, 1, MPI_DOUBLE, MPI_SUM, ep.mpi());
  if (cf > 0 && cf < 1) expect(dropped > 0, tag + "tokens were dropped (" + std::to_string(dropped) + ")");
  if (cf == 0 || cf >= 2) expect(dropped == 0, tag + "nothing dropped");
  if (block_half)
    for (int e = E / 2; e < E; ++e) expect(a.stats.per_expert[size_t(e)] == 0, tag + "expert " + std::to_string(e) + " got no token");
}

// The layer on cp slices of whole sequences (every rank holds the same S
// sequences, cut over the group) against the serial layer on the sequences:
// outputs and input gradients are this rank's rows of the serial ones;
// parameter gradients and routing statistics sum over the group to the
// serial ones (capacity is decided on the whole sequence).
void test_cp(Backend& be, Comm& cp, Family f, float cf, CpLayout layout, const std::string& name) {
  const ModelConfig mc = moe_config(f, cf);
  const int S = 3, N = S * mc.seq_len, C = mc.d_model, P = cp.size();
  const bool zz = layout == CpLayout::zigzag;
  auto cp_rows = [&](const std::vector<float>& rows) {
    return pentad::test::slice_rows(rows, zz, S, mc.seq_len, C, P, cp.rank());
  };
  const std::string tag = std::string(f == Family::gpt2 ? "gpt2 " : "llama ") + name + " cp=" + std::to_string(P) + ": ";
  Layer serial(mc, be, nullptr, false), par(mc, be, nullptr, false, &cp, layout);
  const std::vector<float> x = tokens(N, C, 7, false), dy = tokens(N, C, 107, false);
  const float ls = 1.0f / float(N);
  const Result a = run(serial, be, mc, x, dy, ls);
  const Result b = run(par, be, mc, cp_rows(x), cp_rows(dy), ls);
  // With overflow a late slice of every sequence can lose all its choices:
  // its output rows are then exactly zero (the residual is zero here).
  const std::vector<float> ref_out = cp_rows(a.out);
  if (std::all_of(ref_out.begin(), ref_out.end(), [](float v) { return v == 0; }))
    expect(b.out == ref_out, tag + "output (every choice of these rows dropped: zero)");
  else
    expect_near(tag + "output", b.out, ref_out);
  expect_near(tag + "input gradient", b.dx, cp_rows(a.dx));
  auto summed = [&](std::vector<float> v) {
    MPI_Allreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_FLOAT, MPI_SUM, cp.mpi());
    return v;
  };
  expect_near(tag + "router gradient", summed(b.drouter), a.drouter);
  for (size_t t = 0; t < a.dexperts.size(); ++t)
    expect_near(tag + "expert tensor " + std::to_string(t) + " gradient", summed(b.dexperts[t]), a.dexperts[t]);
  std::vector<double> st = {b.stats.aux_sum, b.stats.z_sum, b.stats.assigned, b.stats.dropped};
  st.insert(st.end(), b.stats.per_expert.begin(), b.stats.per_expert.end());
  MPI_Allreduce(MPI_IN_PLACE, st.data(), int(st.size()), MPI_DOUBLE, MPI_SUM, cp.mpi());
  expect(std::equal(a.stats.per_expert.begin(), a.stats.per_expert.end(), st.begin() + 4) &&
             st[2] == a.stats.assigned && st[3] == a.stats.dropped &&
             std::fabs(st[0] - a.stats.aux_sum) <= 1e-9 * std::fabs(a.stats.aux_sum) &&
             std::fabs(st[1] - a.stats.z_sum) <= 1e-6 * std::fabs(a.stats.z_sum),
         tag + "routing statistics summed over cp");
  if (cf > 0 && cf < 1) expect(a.stats.dropped > 0, tag + "tokens were dropped");
}

// Central differences of J = sum(out * dy) + aux_coef*ls*T*aux_sum + z_coef*ls*z_sum.
// top_k, renormalize: the routing rule (model.top_k, renormalize_top_k; -1 = top_k's default).
// shared: a shared expert 20 wide (0 none, 1 ungated, 2 gated by sigmoid(x . w)).
void test_fd(Backend& be, Family f, bool with_dy, int top_k = 2, int renormalize = -1, int shared = 0) {
  ModelConfig mc = moe_config(f, 1.0f);
  mc.top_k = top_k;
  mc.renormalize_top_k = renormalize;
  mc.shared_expert_ffn = shared > 0 ? 20 : 0;
  mc.shared_expert_gate = shared == 2;
  const int S = 2, N = S * mc.seq_len, C = mc.d_model, E = mc.n_experts;
  const std::string tag = std::string(f == Family::gpt2 ? "gpt2" : "llama") + (with_dy ? " all terms" : " aux+z only") +
                          " top-" + std::to_string(top_k) +
                          (mc.renormalizes_top_k() ? " renormalised" : " raw probabilities") +
                          (shared == 2 ? " gated shared expert" : shared == 1 ? " shared expert" : "") + ": ";
  Layer L(mc, be, nullptr, false);
  const std::vector<float> x = tokens(N, C, 7, false);
  std::vector<float> dy = tokens(N, C, 8, false);
  if (!with_dy) std::fill(dy.begin(), dy.end(), 0.0f);
  const float ls = 1.0f / float(N);
  const Result g = run(L, be, mc, x, dy, ls);
  auto objective = [&](const std::vector<float>& xx) {
    Result r;
    r.stats.reset(1, E);
    float* xd = dev_of(be, xx);
    std::vector<float> z(xx.size(), 0.0f);
    float* resid = dev_of(be, z);
    float* out = be.alloc(xx.size(), Mem::scratch);
    MoeCtxPtr ctx;
    L.moe.forward(ctx, L.p, 0, out, resid, xd, N, &r.stats);
    const std::vector<float> o = host_of(be, out, xx.size());
    double J = 0;
    for (size_t i = 0; i < o.size(); ++i) J += double(o[i]) * dy[i];
    J += double(mc.aux_loss_coef) * ls * mc.seq_len * r.stats.aux_sum + double(mc.z_loss_coef) * ls * r.stats.z_sum;
    for (float* p : {xd, resid, out}) be.free_bytes(p);
    return std::make_pair(J, r.stats.per_expert);
  };
  const double h = 1e-2;
  // Router weights.
  float* w = L.dense.param(L.p.router);
  std::vector<float> w0 = host_of(be, w, size_t(E) * C), fd_w(w0.size()), an_w;
  const auto base = objective(x);
  int flips = 0;
  for (size_t i = 0; i < w0.size(); ++i) {
    std::vector<float> wp = w0;
    wp[i] = float(w0[i] + h);
    be.from_host(w, wp.data(), wp.size() * sizeof(float));
    const auto jp = objective(x);
    wp[i] = float(w0[i] - h);
    be.from_host(w, wp.data(), wp.size() * sizeof(float));
    const auto jm = objective(x);
    fd_w[i] = float((jp.first - jm.first) / (2 * h));
    // A routing change inside [-h, h] makes the objective jump: skip those.
    if (jp.second != base.second || jm.second != base.second) {
      fd_w[i] = g.drouter[i];
      ++flips;
    }
  }
  be.from_host(w, w0.data(), w0.size() * sizeof(float));
  expect(flips < int(w0.size()) / 4, tag + "few routing flips under perturbation (" + std::to_string(flips) + ")");
  expect_near(tag + "router gradient vs finite differences", g.drouter, fd_w, kFiniteDiff);
  // Inputs (a subset of elements).
  std::vector<float> fd_x, an_x;
  for (size_t i = 0; i < x.size(); i += 5) {
    std::vector<float> xp = x;
    xp[i] = float(x[i] + h);
    const auto jp = objective(xp);
    xp[i] = float(x[i] - h);
    const auto jm = objective(xp);
    if (jp.second != base.second || jm.second != base.second) continue;
    fd_x.push_back(float((jp.first - jm.first) / (2 * h)));
    an_x.push_back(g.dx[i]);
  }
  expect_near(tag + "input gradient vs finite differences (" + std::to_string(fd_x.size()) + " elements)", an_x,
               fd_x, kFiniteDiff);
  // Expert weights and biases, then the shared expert's weights, biases
  // and gate (every 7th element of each tensor; the gate's (1, C) weight
  // every element). Perturbations that change the routing are skipped.
  if (!with_dy) return;
  auto check_tensor = [&](ParamStore& store, int i, const std::vector<float>& an, size_t stride) {
    float* pw = store.param(i);
    const std::vector<float> p0 = host_of(be, pw, store.info(i).numel());
    std::vector<float> fd_p, an_p;
    for (size_t e = 0; e < p0.size(); e += stride) {
      std::vector<float> pp = p0;
      pp[e] = float(p0[e] + h);
      be.from_host(pw, pp.data(), pp.size() * sizeof(float));
      const auto jp = objective(x);
      pp[e] = float(p0[e] - h);
      be.from_host(pw, pp.data(), pp.size() * sizeof(float));
      const auto jm = objective(x);
      if (jp.second != base.second || jm.second != base.second) continue;
      fd_p.push_back(float((jp.first - jm.first) / (2 * h)));
      an_p.push_back(an[e]);
    }
    be.from_host(pw, p0.data(), p0.size() * sizeof(float));
    expect_near(tag + store.info(i).name + " gradient vs finite differences", an_p, fd_p, kFiniteDiff);
  };
  size_t t = 0;
  for (int i : {L.p.w_gate, L.p.w_up, L.p.b_up, L.p.w_down, L.p.b_down})
    if (i >= 0) check_tensor(L.experts, i, g.dexperts[t++], 7);
  t = 0;
  for (int i : shared_tensors(L.p))
    if (i >= 0) check_tensor(L.dense, i, g.dshared[t++], i == L.p.s_w ? 1 : 7);
  expect(shared == 0 || t == size_t(f == Family::gpt2 ? 4 : 3) + (shared == 2 ? 1 : 0),
         tag + "every shared-expert tensor checked (" + std::to_string(t) + ")");
}

pentad::test::JobGroup& job = pentad::test::job_group("ep");

class MoeExpertParallel : public ::testing::TestWithParam<Family> {};

TEST_P(MoeExpertParallel, Capacity125) { test_ep(job.be(), job.comm(), GetParam(), 1.25f, false, "capacity 1.25"); }

TEST_P(MoeExpertParallel, CapacityOverflow) {
  test_ep(job.be(), job.comm(), GetParam(), 0.25f, false, "capacity 0.25 (overflow)");
}

TEST_P(MoeExpertParallel, Dropless) { test_ep(job.be(), job.comm(), GetParam(), 0.0f, false, "dropless"); }

TEST_P(MoeExpertParallel, GatedSharedExpert) {
  test_ep(job.be(), job.comm(), GetParam(), 1.25f, false, "gated shared expert", true);
}

TEST_P(MoeExpertParallel, HalfTheExpertsUnused) {
  test_ep(job.be(), job.comm(), GetParam(), 0.0f, true, "half the experts unused");
}

// The same ranks as a context-parallel group (the sequence length, 8, takes
// zig-zag over 2 ranks and contiguous over 2 and 4).
TEST_P(MoeExpertParallel, AsCpGroupZigzagOverflow) {
  if (job.comm().size() != 2) GTEST_SKIP() << "zig-zag of seq_len 8 needs cp = 2";
  test_cp(job.be(), job.comm(), GetParam(), 0.25f, CpLayout::zigzag, "zigzag capacity 0.25 (overflow)");
}

TEST_P(MoeExpertParallel, AsCpGroupContiguousOverflow) {
  test_cp(job.be(), job.comm(), GetParam(), 0.25f, CpLayout::contiguous, "contiguous capacity 0.25 (overflow)");
}

TEST_P(MoeExpertParallel, AsCpGroupContiguousDropless) {
  test_cp(job.be(), job.comm(), GetParam(), 0.0f, CpLayout::contiguous, "contiguous dropless");
}

class MoeFiniteDifferences : public ::testing::TestWithParam<Family> {};

TEST_P(MoeFiniteDifferences, AuxAndZLossesOnly) { test_fd(job.be(), GetParam(), false); }

TEST_P(MoeFiniteDifferences, AllTerms) { test_fd(job.be(), GetParam(), true); }

// The routing rules (model.renormalize_top_k): top-2 by the raw
// probabilities, top-1 by its probability (the default) and renormalised
// to 1 (the loss then reaches the router through the auxiliary losses only).
TEST_P(MoeFiniteDifferences, AllTermsTopTwoRawProbabilities) { test_fd(job.be(), GetParam(), true, 2, 0); }

TEST_P(MoeFiniteDifferences, AllTermsTopOne) { test_fd(job.be(), GetParam(), true, 1); }

TEST_P(MoeFiniteDifferences, AllTermsTopOneRenormalised) { test_fd(job.be(), GetParam(), true, 1, 1); }
// A shared expert beside the routed ones (model.shared_expert_ffn), alone
// and scaled by its gate (Qwen2-MoE's): its tensors, and its parts of the
// input gradient.
TEST_P(MoeFiniteDifferences, AllTermsSharedExpert) { test_fd(job.be(), GetParam(), true, 2, -1, 1); }
TEST_P(MoeFiniteDifferences, AllTermsGatedSharedExpert) { test_fd(job.be(), GetParam(), true, 2, 0, 2); }

std::string family_name(const ::testing::TestParamInfo<Family>& i) {
  return i.param == Family::gpt2 ? "gpt2" : "llama";
}

INSTANTIATE_TEST_SUITE_P(Families, MoeExpertParallel, ::testing::Values(Family::gpt2, Family::llama), family_name);
INSTANTIATE_TEST_SUITE_P(Families, MoeFiniteDifferences, ::testing::Values(Family::gpt2, Family::llama),
                         family_name);

}  // namespace
