// The memory refusal: before the model is built, each rank compares the bytes
// the memory plan gives it (the planner's estimate_memory, built on the
// model's own buffer lists) with the memory it can get, so a layout that
// cannot fit is one named error instead of a std::bad_alloc (or a cudaMalloc
// failure) mid-setup.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "comm/topology.hpp"
#include "config/config.hpp"

namespace pentad {

// What one rank's plan asks of one memory (host RAM or its device's memory)
// and what that memory offers it.
struct MemoryDemand {
  int rank = 0;
  int stage = 0;                                      // pipeline stage
  std::string memory;                                 // "host memory" or "device memory"
  std::vector<std::pair<std::string, double>> parts;  // planned bytes by buffer kind (zeros are left out)
  double available_bytes = 0;                         // this rank's share of that memory
  std::string available_from;                         // how the share was found, for the message
  std::string keys;                                   // the deck keys that drive the largest part
};

// The memory a rank can get: host RAM shared by the ranks on its host, and
// (on a backend with device memory) its device shared by the ranks on it.
struct MemoryOffer {
  std::string host;
  double host_available_bytes = 0;  // MemAvailable of the host; 0: unknown (no host refusal)
  int ranks_on_host = 1;
  std::optional<DeviceMemory> device;  // nullopt: the backend's memory is host RAM
  int ranks_on_device = 1;
};

// What the plan of `cfg` asks of a rank of pipeline stage `stage`: without a
// device, one demand on host memory (the model's buffers and the host token
// buffers); with one, the model's buffers on device memory and the token
// buffers on host memory (left out when the host's memory is unknown). Empty
// for a deck the planner cannot model. Pure: no MPI, no backend.
std::vector<MemoryDemand> memory_demands(const Config& cfg, int rank, int stage, const MemoryOffer& offer);

// The refusal message when the planned bytes (the sum of the parts) exceed
// the available bytes; "" when they fit. Pure: no MPI, no backend.
std::string memory_refusal(const MemoryDemand& d);

// Throws InputError on every rank (the lowest failing rank's message: its
// planned bytes by category, the memory available to it, the deck keys that
// drive the largest term) when a rank's plan exceeds the memory it can get:
// host RAM (MemAvailable / ranks on its node) on the cpu backend; on a
// backend with device memory (cuda), the device's free bytes / ranks on that
// device for the model's buffers, and host RAM for the host token buffers.
// Collective over topo.job.
void check_memory_fits(const Config& cfg, const Topology& topo, const Backend& be);

}  // namespace pentad
