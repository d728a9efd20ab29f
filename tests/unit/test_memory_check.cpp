// The memory refusal's pure part (src/train/memory_check.hpp) without MPI or
// a GPU: the demands a plan makes of host RAM or of a device's memory, and
// the message when they do not fit. The device branch is what a CUDA rank
// runs with cudaMemGetInfo's numbers; here the numbers are given. The
// planned bytes are checked against the planner's own estimate, the token
// buffers against their count derived by hand (4 bytes per int32 token).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/text.hpp"
#include "plan/planner.hpp"
#include "train/memory_check.hpp"

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

const std::string kDeck =
    "[model]\nfamily = \"gpt2\"\nn_layers = 2\nd_model = 32\nn_heads = 4\nvocab_size = 256\nseq_len = 16\n"
    "[train]\nmicro_batch = 2\n[data]\ntrain = \"x\"\n";

pentad::Config deck(const std::vector<std::string>& sets, int ranks = 1) {
  return pentad::parse_config(kDeck, "t.toml", sets, ranks);
}

double sum_parts(const pentad::MemoryDemand& d) {
  double s = 0;
  for (const auto& p : d.parts) s += p.second;
  return s;
}

double part(const pentad::MemoryDemand& d, const std::string& name) {
  for (const auto& p : d.parts)
    if (p.first == name) return p.second;
  return -1;
}

pentad::MemoryOffer device_offer(double free_bytes, int ranks_on_device, double host_bytes = 64 * kGiB) {
  pentad::MemoryOffer o;
  o.host = "node7";
  o.host_available_bytes = host_bytes;
  o.ranks_on_host = 4;
  pentad::DeviceMemory d;
  d.free_bytes = size_t(free_bytes);
  d.total_bytes = size_t(80 * kGiB);
  d.device = 2;
  o.device = d;
  o.ranks_on_device = ranks_on_device;
  return o;
}

}  // namespace

TEST(MemoryRefusal, FitsUpToTheLastByte) {
  pentad::MemoryDemand d;
  d.memory = "device memory";
  d.parts = {{"params", 1000}, {"grads", 0}, {"activations", 24}};
  d.available_bytes = 1024;
  EXPECT_EQ(pentad::memory_refusal(d), "");
  d.available_bytes = 1023;
  const std::string msg = pentad::memory_refusal(d);
  EXPECT_NE(msg.find("plans 1.00 KiB (1.02e+03 bytes) of device memory (params "), std::string::npos) << msg;
  EXPECT_EQ(msg.find("grads"), std::string::npos) << "a zero part is listed: " << msg;
}

TEST(MemoryDemands, HostOnlyHoldsTheModelAndTheTokens) {
  const pentad::Config cfg = deck({});
  pentad::MemoryOffer o;
  o.host = "h";
  o.host_available_bytes = 8 * kGiB;
  o.ranks_on_host = 2;
  const auto ds = pentad::memory_demands(cfg, 0, 0, o);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].memory, "host memory");
  EXPECT_DOUBLE_EQ(ds[0].available_bytes, 4 * kGiB);
  // (b, T) inputs and targets, twice (the step's and the cp rank's), int32.
  const double tokens = 2.0 * 2 * (16 + 16) * 4;
  EXPECT_DOUBLE_EQ(part(ds[0], "host token buffers"), tokens);
  EXPECT_DOUBLE_EQ(sum_parts(ds[0]), pentad::estimate_memory(cfg).stages[0].total + tokens);
  EXPECT_EQ(pentad::memory_refusal(ds[0]), "");
  o.host_available_bytes = 0;  // MemAvailable unreadable: nothing to refuse against
  EXPECT_TRUE(pentad::memory_demands(cfg, 0, 0, o).empty());
}

TEST(MemoryDemands, DeviceTooSmallForTheParameters) {
  const pentad::Config cfg = deck({"model.n_layers=4000"});
  const double planned = pentad::estimate_memory(cfg).stages[0].total;
  ASSERT_GT(planned, 1 * kGiB);
  const auto ds = pentad::memory_demands(cfg, 3, 0, device_offer(4 * kGiB, 4));
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0].memory, "device memory");
  EXPECT_DOUBLE_EQ(sum_parts(ds[0]), planned);
  EXPECT_DOUBLE_EQ(ds[0].available_bytes, 1 * kGiB);  // 4 GiB free shared by 4 ranks
  const std::string msg = pentad::memory_refusal(ds[0]);
  for (const std::string& want :
       {std::string("memory: the layout does not fit: rank 3 (pipeline stage 0) plans ") + pentad::format_bytes(planned, 2),
        std::string(" of device memory (params "), std::string("but has 1.00 GiB"),
        std::string("device 2 of host node7 reports 4.00 GiB free of 80.00 GiB / 4 rank(s) on it"),
        std::string("model.n_layers"), std::string("parallel.zero")})
    EXPECT_NE(msg.find(want), std::string::npos) << "missing '" << want << "' in: " << msg;
  // The host keeps only the token buffers, which fit.
  EXPECT_EQ(ds[1].memory, "host memory");
  EXPECT_EQ(ds[1].parts.size(), 1u);
  EXPECT_EQ(pentad::memory_refusal(ds[1]), "");
  // The same plan fits a device with enough free memory.
  EXPECT_EQ(pentad::memory_refusal(pentad::memory_demands(cfg, 3, 0, device_offer(planned + 1, 1))[0]), "");
}

TEST(MemoryDemands, DeviceTooSmallForTheActivations) {
  const pentad::Config cfg = deck({"train.micro_batch=200000"});
  const pentad::StageMemory sm = pentad::estimate_memory(cfg).stages[0];
  ASSERT_GT(sm.bytes[int(pentad::Mem::activations)], sm.bytes[int(pentad::Mem::params)]);
  const auto ds = pentad::memory_demands(cfg, 0, 0, device_offer(1 * kGiB, 1, 0));
  ASSERT_EQ(ds.size(), 1u) << "no host demand when MemAvailable is unknown";
  const std::string msg = pentad::memory_refusal(ds[0]);
  EXPECT_NE(msg.find("of device memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("activations "), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.micro_batch"), std::string::npos) << msg;
}

TEST(MemoryDemands, HostTooSmallForTheTokenBuffersOfADeviceRun) {
  const pentad::Config cfg = deck({"train.micro_batch=200000"});
  const double tokens = 2.0 * 200000 * (16 + 16) * 4;
  const auto ds = pentad::memory_demands(cfg, 1, 0, device_offer(1e15, 1, 4 * (tokens - 1)));
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(pentad::memory_refusal(ds[0]), "");  // the device is large enough
  EXPECT_DOUBLE_EQ(sum_parts(ds[1]), tokens);
  const std::string msg = pentad::memory_refusal(ds[1]);  // 4 ranks on the host: a quarter each
  EXPECT_NE(msg.find("rank 1 (pipeline stage 0) plans "), std::string::npos) << msg;
  EXPECT_NE(msg.find(" of host memory (host token buffers "), std::string::npos) << msg;
  EXPECT_NE(msg.find("on host node7 / 4 rank(s) there"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.micro_batch x train.grad_accum x model.seq_len"), std::string::npos) << msg;
}
