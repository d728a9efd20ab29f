// The memory refusal: before the model is built, each rank compares the bytes
// the memory plan gives it (the planner's estimate_memory, built on the
// model's own buffer lists) with the memory it can get, so a layout that
// cannot fit is one named error instead of a std::bad_alloc mid-setup.
#pragma once

#include "backend/backend.hpp"
#include "comm/topology.hpp"
#include "config/config.hpp"

namespace pentad {

// Throws InputError on every rank (the lowest failing rank's message: its
// planned bytes by category, the memory available to it, the deck keys that
// drive the largest term) when a rank's plan exceeds its host memory
// (MemAvailable / ranks on its node; cpu backend). Collective over topo.job.
void check_memory_fits(const Config& cfg, const Topology& topo, const Backend& be);

}  // namespace pentad
