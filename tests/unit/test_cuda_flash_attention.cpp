// The fused bf16 attention forward (cuda/attention_flash.hpp's fwd_block,
// the code the device kernel runs), on the host: an executor that holds a
// warp's 32 lanes and computes each mma.sync m16n8k16 from the fragment
// layout the PTX ISA gives (written out here independently of the kernel's
// addressing), the quad shuffles over each group of four lanes, and the
// block's loads for all of its threads. What it cannot check: the real
// instruction, the barriers' placement (compute-sanitizer's racecheck in
// scripts/gpu_check.sh does), speed.
//
// Against the CPU backend's bf16 attention (cpu/attention.cpp), within the
// bound of tests/lib/attention_p_rounding.hpp (the two round P at different
// points: at most two bf16 roundings of each term of out). Cases: causal and not, GQA and
// MQA, several query blocks and key tiles, partial tiles, ring-attention key
// blocks before, across and after the queries, rows that see no key. The
// buffers' tails must stay untouched.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../../cuda/attention_flash.hpp"
#include "backend/backend.hpp"
#include "bf16.hpp"
#include "cpu.hpp"
#include "../lib/attention_p_rounding.hpp"

namespace {

namespace fl = pentad::flash;

float bits_to_float(uint32_t b) { return pentad::bf16_to_float(uint16_t(b & 0xffffu)); }

// One warp of the kernels on the host, its lanes' registers `State`.
template <class State>
struct HostWarp {
  int warp;
  std::array<State, 32> lanes{};

  template <class F>
  void each(F&& f) {
    for (int l = 0; l < 32; ++l) f(l, lanes[size_t(l)]);
  }

  // D (16 x 8) = A (16 x 16) B (16 x 8) + C, fragments per the PTX ISA's
  // "Matrix Fragments for mma.m16n8k16 with floating point type" (.bf16):
  // group = lane >> 2, t = lane % 4; a_i: row group for i in {0,1,4,5}, else
  // group + 8; column 2t + (i & 1), + 8 for i >= 4; b_i: row 2t + (i & 1),
  // + 8 for i >= 2, column group; c_i: row group for i < 2, else group + 8,
  // column 2t + (i & 1). Element i is half (i & 1) of register i / 2.
  template <class Acc, class A, class B>
  void mma(Acc&& acc, A&& a, B&& b) {
    float Am[16][16] = {}, Bm[16][8] = {}, Cm[16][8] = {};
    float* cs[32];
    for (int l = 0; l < 32; ++l) {
      State& L = lanes[size_t(l)];
      uint32_t af[4], bf[2];
      a(l, L, af);
      b(l, L, bf);
      cs[l] = acc(l, L);
      const int g = l >> 2, t = l & 3;
      for (int i = 0; i < 8; ++i) {
        const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8, col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
        Am[row][col] = bits_to_float(af[i / 2] >> (16 * (i & 1)));
      }
      for (int i = 0; i < 4; ++i) Bm[2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = bits_to_float(bf[i / 2] >> (16 * (i & 1)));
      for (int i = 0; i < 4; ++i) Cm[i < 2 ? g : g + 8][2 * t + (i & 1)] = cs[l][i];
    }
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, t = l & 3;
      for (int i = 0; i < 4; ++i) {
        const int row = i < 2 ? g : g + 8, col = 2 * t + (i & 1);
        float s = Cm[row][col];
        for (int k = 0; k < 16; ++k) s += Am[row][k] * Bm[k][col];
        cs[l][i] = s;
      }
    }
  }

  // As the device's two xor shuffles: (x0 + x1) + (x2 + x3) for every lane.
  template <class Op>
  void quad(Op op) {
    for (int g = 0; g < 8; ++g)
      for (int r = 0; r < 2; ++r) {
        float x[4];
        for (int i = 0; i < 4; ++i) x[i] = lanes[size_t(4 * g + i)].red[r];
        const float v = op(op(x[0], x[1]), op(x[2], x[3]));
        for (int i = 0; i < 4; ++i) lanes[size_t(4 * g + i)].red[r] = v;
      }
  }
  void quad_max() { quad([](float p, float q) { return std::fmax(p, q); }); }
  void quad_sum() { quad([](float p, float q) { return p + q; }); }

  template <class F>
  void block(F&& f) {
    for (int tid = 0; tid < fl::kThreads; ++tid) f(tid);
  }
  void sync() {}
};

// The kernel's grid, every warp of every block in turn (the build of
// a.out_bf16 and a.in_bf16).
template <int D, bool OutBf16, bool InBf16>
void run_fwd_as(const fl::FwdArgs& a) {
  auto sm = std::make_unique<fl::Smem<D>>();
  for (int bh = 0; bh < a.B * a.H; ++bh)
    for (int qb = 0; qb < fl::query_blocks(a.Tq); ++qb)
      for (int w = 0; w < fl::kWarps; ++w) {
        auto warp = std::make_unique<HostWarp<fl::LaneState<D>>>();
        warp->warp = w;
        fl::fwd_block<D, OutBf16, InBf16>(*warp, *sm, a, bh / a.H, bh % a.H, qb * fl::kRows);
      }
}

template <int D>
void run_fwd(const fl::FwdArgs& a) {
  if (a.out_bf16)
    a.in_bf16 ? run_fwd_as<D, true, true>(a) : run_fwd_as<D, true, false>(a);
  else
    a.in_bf16 ? run_fwd_as<D, false, true>(a) : run_fwd_as<D, false, false>(a);
}

void run_fwd(const fl::FwdArgs& a, int D) {
  switch (D) {
    case 16: run_fwd<16>(a); break;
    case 32: run_fwd<32>(a); break;
    case 64: run_fwd<64>(a); break;
    case 128: run_fwd<128>(a); break;
    default: FAIL() << "no kernel for D = " << D;
  }
}

std::vector<float> randn(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

struct Case {
  const char* name;
  int B, Tq, Tk, H, Hkv, D, q_offset, k_offset;
  bool causal;
};

// A case's sizes (q and out, k and v, lse) and random q, k, v (seeds seed,
// seed + 1, seed + 2), q doubled: scores of a few units, so that softmax
// rows are neither flat nor one-hot.
struct CaseData {
  size_t nq, nk, nl;
  std::vector<float> q, k, v;
};
CaseData case_data(const Case& c, unsigned seed) {
  CaseData d;
  d.nq = size_t(c.B) * c.Tq * c.H * c.D;
  d.nk = size_t(c.B) * c.Tk * c.Hkv * c.D;
  d.nl = size_t(c.B) * c.H * c.Tq;
  d.q = randn(d.nq, seed);
  d.k = randn(d.nk, seed + 1);
  d.v = randn(d.nk, seed + 2);
  for (auto& x : d.q) x *= 2.0f;
  return d;
}

TEST(FlashAttention, HeadDimensionsBuilt) {
  for (int D = 1; D <= 256; ++D)
    EXPECT_EQ(fl::supports_head_dim(D), D == 16 || D == 32 || D == 64 || D == 128) << D;
  EXPECT_EQ(fl::query_blocks(1), 1);
  EXPECT_EQ(fl::query_blocks(fl::kRows), 1);
  EXPECT_EQ(fl::query_blocks(fl::kRows + 1), 2);
}

TEST(FlashAttention, ForwardEqualsCpuBf16WithinPRounding) {
  const Case cases[] = {
      {"causal gqa D16", 2, 37, 37, 4, 2, 16, 0, 0, true},
      {"causal mqa D64, 3 query blocks, 3 key tiles", 2, 150, 150, 4, 1, 64, 0, 0, true},
      {"ring block past keys", 2, 20, 45, 4, 1, 32, 50, 10, true},
      {"ring block across, 2 query blocks", 1, 70, 130, 2, 2, 64, 60, 0, true},
      {"ring block, masked rows", 1, 40, 24, 2, 2, 32, 0, 30, true},
      {"ring block, no key visible", 1, 16, 16, 2, 2, 32, 0, 64, true},
      {"non-causal D128", 1, 33, 50, 2, 1, 128, 0, 0, false},
      {"causal D128 gqa, exact tiles", 1, 128, 128, 4, 2, 128, 0, 0, true},
  };
  auto cpu = pentad::make_cpu_backend(1);
  cpu->set_compute_dtype(pentad::Dtype::bf16);
  constexpr size_t kGuard = 67;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto [nq, nk, nl, q, k, v] = case_data(c, 11);
    std::vector<float> out(nq), lse(nl), probs(nl * size_t(c.Tk));
    cpu->attention_fwd(out.data(), lse.data(), probs.data(), q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H,
                       c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);

    const float sentinel = 12345.0f;
    std::vector<float> f_out(nq + kGuard, sentinel), f_lse(nl + kGuard, sentinel);
    const fl::FwdArgs a{f_out.data(), f_lse.data(), q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H,
                        c.Hkv, c.q_offset, c.k_offset, c.causal, 1.0f / std::sqrt(float(c.D))};
    run_fwd(a, c.D);

    for (size_t i = nq; i < nq + kGuard; ++i) ASSERT_EQ(f_out[i], sentinel) << "out written past its end";
    for (size_t i = nl; i < nl + kGuard; ++i) ASSERT_EQ(f_lse[i], sentinel) << "lse written past its end";

    const double worst = pentad::test::expect_within_p_rounding(
        std::vector<float>(f_out.begin(), f_out.begin() + long(nq)), std::vector<float>(f_lse.begin(), f_lse.begin() + long(nl)),
        out, lse, probs, v, {c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D});
    std::printf("[%s] largest out error: %.3f of its bound\n", c.name, worst);
  }
}

// An out held in bf16 (FwdArgs::out_bf16, train.bf16_activations): the
// kernel built for it stores bf16 values, each the fp32 kernel's value
// rounded to nearest even, bitwise; lse is the same; nothing is written past
// the B Tq H D values (2 bytes each).
TEST(FlashAttention, ForwardStoresAHeldOutRounded) {
  const Case cases[] = {
      {"causal gqa D16, partial tiles", 2, 37, 37, 4, 2, 16, 0, 0, true},
      {"ring block across, 2 query blocks", 1, 70, 130, 2, 2, 64, 60, 0, true},
      {"ring block, no key visible", 1, 16, 16, 2, 2, 32, 0, 64, true},
      {"causal D128 gqa", 1, 100, 100, 4, 2, 128, 0, 0, true},
  };
  constexpr size_t kGuard = 67;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto [nq, nk, nl, q, k, v] = case_data(c, 31);
    std::vector<float> out(nq), lse(nl);
    fl::FwdArgs a{out.data(), lse.data(), q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H,
                  c.Hkv, c.q_offset, c.k_offset, c.causal, 1.0f / std::sqrt(float(c.D))};
    run_fwd(a, c.D);
    const uint16_t sentinel = 0x7b7b;
    std::vector<uint16_t> held(nq + kGuard, sentinel);
    std::vector<float> held_lse(nl);
    a.out = reinterpret_cast<float*>(held.data());
    a.lse = held_lse.data();
    a.out_bf16 = true;
    run_fwd(a, c.D);
    for (size_t i = nq; i < nq + kGuard; ++i) ASSERT_EQ(held[i], sentinel) << "out written past its end";
    size_t differ = 0;
    for (size_t i = 0; i < nq; ++i)
      if (held[i] != uint16_t(fl::bf16_bits(out[i])) && ++differ <= 5)
        ADD_FAILURE() << "out[" << i << "]: bf16 bits " << held[i] << ", the fp32 value " << out[i] << " rounds to "
                      << fl::bf16_bits(out[i]);
    EXPECT_EQ(differ, 0u);
    EXPECT_EQ(held_lse, lse);
  }
}

// The backward's two kernels, every warp of every block in turn (the build
// of a.in_bf16).
template <int D, bool InBf16>
void run_bwd_as(const fl::BwdArgs& a) {
  auto dq_sm = std::make_unique<fl::DqSmem<D>>();
  for (int bh = 0; bh < a.B * a.H; ++bh)
    for (int qb = 0; qb < fl::query_blocks(a.Tq); ++qb)
      for (int w = 0; w < fl::kWarps; ++w) {
        auto warp = std::make_unique<HostWarp<fl::DqLane<D>>>();
        warp->warp = w;
        fl::dq_block<D, InBf16>(*warp, *dq_sm, a, bh / a.H, bh % a.H, qb * fl::kRows);
      }
  auto kv_sm = std::make_unique<fl::DkvSmem<D>>();
  for (int bh = 0; bh < a.B * a.Hkv; ++bh)
    for (int kb = 0; kb < fl::key_blocks(a.Tk); ++kb)
      for (int w = 0; w < fl::kWarps; ++w) {
        auto warp = std::make_unique<HostWarp<fl::DkvLane<D>>>();
        warp->warp = w;
        fl::dkv_block<D, InBf16>(*warp, *kv_sm, a, bh / a.Hkv, bh % a.Hkv, kb * fl::kKeys);
      }
}

template <int D>
void run_bwd(const fl::BwdArgs& a) {
  a.in_bf16 ? run_bwd_as<D, true>(a) : run_bwd_as<D, false>(a);
}

void run_bwd(const fl::BwdArgs& a, int D) {
  switch (D) {
    case 16: run_bwd<16>(a); break;
    case 32: run_bwd<32>(a); break;
    case 64: run_bwd<64>(a); break;
    case 128: run_bwd<128>(a); break;
    default: FAIL() << "no backward kernel for D = " << D;
  }
}

TEST(FlashAttention, BackwardHeadDimensionsBuilt) {
  for (int D = 1; D <= 256; ++D)
    EXPECT_EQ(fl::supports_bwd_head_dim(D), D == 16 || D == 32 || D == 64 || D == 128) << D;
  EXPECT_EQ(fl::key_blocks(1), 1);
  EXPECT_EQ(fl::key_blocks(fl::kKeys), 1);
  EXPECT_EQ(fl::key_blocks(fl::kKeys + 1), 2);
}

// The backward against the CPU's bf16 attention_bwd on the same out, lse
// and delta, within tests/lib/attention_p_rounding.hpp's backward bound
// (the same rounding points; fp32 order may move a P or dS to the
// neighbouring bf16 value). dq, dk, dv start from random values (the op
// accumulates); nothing may be written past them.
TEST(FlashAttention, BackwardEqualsCpuBf16WithinRounding) {
  const Case cases[] = {
      {"causal gqa D16", 2, 37, 37, 4, 2, 16, 0, 0, true},
      {"causal mqa D64, 3 query blocks, 3 key blocks", 2, 150, 150, 4, 1, 64, 0, 0, true},
      {"ring block past keys", 2, 20, 45, 4, 1, 32, 50, 10, true},
      {"ring block across, 2 query blocks", 1, 70, 130, 2, 2, 64, 60, 0, true},
      {"ring block, masked rows", 1, 40, 24, 2, 2, 32, 0, 30, true},
      {"ring block, no key visible", 1, 16, 16, 2, 2, 32, 0, 64, true},
      {"non-causal gqa D32", 1, 33, 80, 4, 2, 32, 0, 0, false},
      // D = 128: smaller tiles inside the blocks (32 keys in dq, 16 queries
      // in dk/dv), and dV and dK in two passes.
      {"causal gqa D128, 2 query blocks, 2 key blocks, partial tiles", 1, 100, 100, 4, 2, 128, 0, 0, true},
      {"ring block across D128", 1, 37, 90, 2, 1, 128, 40, 0, true},
      {"ring block past keys D128, masked rows", 1, 24, 40, 2, 2, 128, 0, 10, true},
      {"non-causal D128", 1, 33, 50, 2, 1, 128, 0, 0, false},
  };
  auto cpu = pentad::make_cpu_backend(1);
  cpu->set_compute_dtype(pentad::Dtype::bf16);
  constexpr size_t kGuard = 67;
  const float sentinel = 12345.0f;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto [nq, nk, nl, q, k, v] = case_data(c, 21);
    const std::vector<float> dout = randn(nq, 24);
    std::vector<float> out(nq), lse(nl);
    cpu->attention_fwd(out.data(), lse.data(), nullptr, q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H, c.Hkv,
                       c.D, c.q_offset, c.k_offset, c.causal);
    const std::vector<float> dq0 = randn(nq, 25), dk0 = randn(nk, 26), dv0 = randn(nk, 27);
    std::vector<float> dq = dq0, dk = dk0, dv = dv0;
    cpu->attention_bwd(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), nullptr, q.data(),
                       k.data(), v.data(), c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);

    const std::vector<float> delta =
        pentad::test::attention_delta(dout, out, {c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D}, true);
    auto guarded = [&](const std::vector<float>& x) {
      std::vector<float> g(x);
      g.resize(x.size() + kGuard, sentinel);
      return g;
    };
    std::vector<float> f_dq = guarded(dq0), f_dk = guarded(dk0), f_dv = guarded(dv0);
    const float scale = 1.0f / std::sqrt(float(c.D));
    const fl::BwdArgs a{f_dq.data(), f_dk.data(), f_dv.data(), dout.data(), lse.data(), delta.data(), q.data(),
                        k.data(), v.data(), c.B, c.Tq, c.Tk, c.H, c.Hkv, c.q_offset, c.k_offset, c.causal, scale};
    run_bwd(a, c.D);
    for (size_t i = 0; i < kGuard; ++i) {
      ASSERT_EQ(f_dq[nq + i], sentinel) << "dq written past its end";
      ASSERT_EQ(f_dk[nk + i], sentinel) << "dk written past its end";
      ASSERT_EQ(f_dv[nk + i], sentinel) << "dv written past its end";
    }

    auto head = [](const std::vector<float>& x, size_t n) { return std::vector<float>(x.begin(), x.begin() + long(n)); };
    const pentad::test::BwdWorst worst = pentad::test::expect_bwd_within_rounding(
        head(f_dq, nq), head(f_dk, nk), head(f_dv, nk), dq, dk, dv, q, k, v, dout, lse, delta,
        {c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D}, c.q_offset, c.k_offset, c.causal);
    std::printf("[%s] largest errors, as fractions of their bounds: dq %.1e, dk %.1e, dv %.1e\n", c.name, worst.dq,
                worst.dk, worst.dv);
  }
}


// q, k, v held in bf16 (FwdArgs / BwdArgs::in_bf16, train.bf16_activations):
// the kernels built for them read the stored bits where the fp32 build
// rounds on load, so from q, k, v rounded and stored as bf16 every output
// is bitwise the fp32 build's from the fp32 values: out and lse (out in
// fp32 and held), dq, dk, dv. The operands' buffers are exactly their
// bf16 size.
TEST(FlashAttention, HeldOperandsReadAsTheirBf16Values) {
  const Case cases[] = {
      {"causal gqa D16, partial tiles", 2, 37, 37, 4, 2, 16, 0, 0, true},
      {"ring block across D64, 2 query blocks", 1, 70, 130, 2, 2, 64, 60, 0, true},
      {"ring block past keys D32, masked rows", 1, 40, 24, 2, 2, 32, 0, 30, true},
      {"causal gqa D128, 2 query and key blocks", 1, 100, 100, 4, 2, 128, 0, 0, true},
      {"non-causal D128", 1, 33, 50, 2, 1, 128, 0, 0, false},
  };
  auto bits = [](const std::vector<float>& x) {
    std::vector<uint16_t> b(x.size());
    for (size_t i = 0; i < x.size(); ++i) b[i] = uint16_t(fl::bf16_bits(x[i]));
    return b;
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto [nq, nk, nl, q, k, v] = case_data(c, 41);
    const std::vector<uint16_t> q16 = bits(q), k16 = bits(k), v16 = bits(v);
    // Point a call's q, k, v at the bf16 copies (FwdArgs or BwdArgs).
    auto read_held = [&](auto& args) {
      args.q = reinterpret_cast<const float*>(q16.data());
      args.k = reinterpret_cast<const float*>(k16.data());
      args.v = reinterpret_cast<const float*>(v16.data());
      args.in_bf16 = true;
    };
    const float scale = 1.0f / std::sqrt(float(c.D));
    for (const bool out_bf16 : {false, true}) {
      SCOPED_TRACE(out_bf16 ? "out held" : "out fp32");
      std::vector<float> out(nq), lse(nl), out_h(nq), lse_h(nl);
      fl::FwdArgs a{out.data(), lse.data(), q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H,
                    c.Hkv, c.q_offset, c.k_offset, c.causal, scale, out_bf16};
      run_fwd(a, c.D);
      a.out = out_h.data();
      a.lse = lse_h.data();
      read_held(a);
      run_fwd(a, c.D);
      EXPECT_EQ(std::memcmp(out.data(), out_h.data(), nq * sizeof(float)), 0) << "out";
      EXPECT_EQ(std::memcmp(lse.data(), lse_h.data(), nl * sizeof(float)), 0) << "lse";
    }
    std::vector<float> out(nq), lse(nl);
    run_fwd(fl::FwdArgs{out.data(), lse.data(), q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H, c.Hkv,
                        c.q_offset, c.k_offset, c.causal, scale},
            c.D);
    const std::vector<float> dout = randn(nq, 44);
    const std::vector<float> delta =
        pentad::test::attention_delta(dout, out, {c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D}, true);
    std::vector<float> dq = randn(nq, 45), dk = randn(nk, 46), dv = randn(nk, 47);
    std::vector<float> dq_h = dq, dk_h = dk, dv_h = dv;
    fl::BwdArgs a{dq.data(), dk.data(), dv.data(), dout.data(), lse.data(), delta.data(), q.data(), k.data(),
                  v.data(), c.B, c.Tq, c.Tk, c.H, c.Hkv, c.q_offset, c.k_offset, c.causal, scale};
    run_bwd(a, c.D);
    a.dq = dq_h.data();
    a.dk = dk_h.data();
    a.dv = dv_h.data();
    read_held(a);
    run_bwd(a, c.D);
    EXPECT_EQ(std::memcmp(dq.data(), dq_h.data(), nq * sizeof(float)), 0) << "dq";
    EXPECT_EQ(std::memcmp(dk.data(), dk_h.data(), nk * sizeof(float)), 0) << "dk";
    EXPECT_EQ(std::memcmp(dv.data(), dv_h.data(), nk * sizeof(float)), 0) << "dv";
  }
}

}  // namespace
