// The bf16 weight copies under ZeRO-1 on a rank whose own shard is empty:
// that rank runs no AdamW, so nothing of its own marks its copy stale; only
// DataParallel's weights_written after the gather of the updated shards
// does. A GEMM read through the copy after each step must see the updated
// master weights, rounded, on every rank (2 ranks: 16 weights cut into
// 16-element shards leave rank 1 none).
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "bf16.hpp"
#include "comm/comm.hpp"
#include "config/config.hpp"
#include "model/memory_plan.hpp"
#include "model/params.hpp"
#include "parallel/dp/data_parallel.hpp"
#include "runtime.hpp"

namespace {

TEST(WeightCopiesMpi, Zero1RankWithoutShardSeesEveryUpdate) {
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ASSERT_EQ(size, 2);
  const std::string deck =
      "[model]\nn_layers = 1\n[parallel]\ndp = 2\nzero = 1\n[train]\ndtype = \"bf16\"\nweight_decay = 0\n"
      "[data]\ntrain = \"x.bin\"\n";
  const pentad::Config cfg = pentad::parse_config(deck, "deck.toml", {}, size);
  auto be = pentad::make_backend(cfg, MPI_COMM_WORLD);
  auto dp = pentad::make_comm(cfg, *be, MPI_COMM_WORLD, "dp");
  const int n = 16;
  ASSERT_EQ(pentad::zero_shard_elems(n, size), size_t(n)) << "rank 1's shard must be empty";
  pentad::ParamStore params(*be);
  const int w = params.add("w", {2, n / 2}, pentad::Init::normal, 0.5f, false);
  pentad::DataParallel dpar(params, *be, *dp, cfg.train, 1, 1.0);
  dpar.init(3);
  // y(1, 2) = x W^T with x one-hot on column c: y = W[:, c] as the GEMM reads it.
  auto gemm_column = [&](int c) {
    std::vector<float> x(n / 2, 0.0f), y(2);
    x[size_t(c)] = 1.0f;
    be->gemm(false, true, 1, 2, n / 2, 1.0f, x.data(), n / 2, params.param(w), n / 2, 0.0f, y.data(), 2);
    return y;
  };
  std::vector<float> grad(n), master(n);
  for (int s = 1; s <= 3; ++s) {
    (void)gemm_column(0);  // the copy is current before the step
    const size_t made = be->weight_copies_made();
    dpar.begin_step();
    for (int i = 0; i < n; ++i) grad[size_t(i)] = float(i % 5) - 2.0f + 0.25f * float(s);
    be->from_host(params.grad(w), grad.data(), n * sizeof(float));
    dpar.finish_backward();
    dpar.optimizer_step(s, 0.05f, 1.0f);
    dpar.get_param(w, master.data());
    for (int c = 0; c < n / 2; ++c) {
      const std::vector<float> y = gemm_column(c);
      for (int r = 0; r < 2; ++r)
        ASSERT_EQ(y[size_t(r)], pentad::round_bf16(master[size_t(r * n / 2 + c)]))
            << "rank " << rank << ", step " << s << ": the GEMM read a stale copy of W[" << r << "][" << c << "]";
    }
    EXPECT_EQ(be->weight_copies_made(), made + 1) << "rank " << rank << ": one copy per step";
  }
}

}  // namespace
