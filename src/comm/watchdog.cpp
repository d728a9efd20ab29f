// The MPI watchdog (see watchdog.hpp). The armed call is published in a few
// atomics so arming costs a clock read and three stores (it runs around
// every MPI call of the step); the thread polls them a few times a second.
#include "comm/watchdog.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>

#include "core/error.hpp"

namespace pentad {
namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// The armed call; armed_at_ns == 0: nothing armed.
std::atomic<int64_t> g_armed_at_ns{0};
std::atomic<const std::string*> g_group{nullptr};
std::atomic<const char*> g_op{nullptr};
std::atomic<int> g_step{0};
std::atomic<int64_t> g_timeout_ns{0};

class Watchdog {
 public:
  Watchdog() : thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it reads

  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      // Poll at a quarter of the timeout (at most 4 times a second): the job
      // ends at most timeout * 1.25 after the call blocked.
      const int64_t timeout_ns = g_timeout_ns.load();
      const auto poll = std::chrono::nanoseconds(std::min<int64_t>(timeout_ns / 4, 250'000'000));
      if (wake_.wait_for(lock, poll, [this] { return stop_; })) return;
      check(timeout_ns);
    }
  }

  // Fires when one and the same call has stayed armed past the timeout (the
  // armed time read again after the names, so they belong to that call).
  static void check(int64_t timeout_ns) {
    const int64_t t0 = g_armed_at_ns.load();
    if (t0 == 0 || now_ns() - t0 < timeout_ns) return;
    const std::string* group = g_group.load();
    const char* op = g_op.load();
    const int step = g_step.load();
    if (g_armed_at_ns.load() != t0 || group == nullptr || op == nullptr) return;
    const double waited_s = double(now_ns() - t0) * 1e-9;
    char head[160];
    std::snprintf(head, sizeof head, "MPI %s in group '", op);
    char tail[320];
    std::snprintf(tail, sizeof tail,
                  "' did not return within parallel.comm_timeout_s = %g s (waited %.1f s, %s%d): a rank of the "
                  "group is stuck or dead; ending the job",
                  double(timeout_ns) * 1e-9, waited_s, step > 0 ? "step " : "setup, before step ", step > 0 ? step : 1);
    fatal_at(__FILE__, __LINE__, head + *group + tail);
  }
};

}  // namespace

void start_comm_watchdog(double timeout_s) {
  g_timeout_ns.store(int64_t(timeout_s * 1e9));
  static Watchdog watchdog;  // one thread per process, joined at exit
}

void set_watchdog_step(int step) { g_step.store(step, std::memory_order_relaxed); }

WatchScope::WatchScope(const std::string& group, const char* op) {
  g_group.store(&group, std::memory_order_relaxed);
  g_op.store(op, std::memory_order_relaxed);
  g_armed_at_ns.store(now_ns(), std::memory_order_release);
}

WatchScope::~WatchScope() { g_armed_at_ns.store(0, std::memory_order_release); }

}  // namespace pentad
