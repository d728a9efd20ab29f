// Preemption signals (checkpoint.hpp): SIGUSR1 / SIGTERM set a flag that the
// trainer polls every step; it agrees on it over the job, checkpoints and
// exits 0. The handler only stores the signal number (async-signal-safe).
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "io/checkpoint.hpp"

namespace pentad {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void pentad_on_signal(int sig) { g_signal = sig; }

}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = pentad_on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGUSR1, SIGTERM})
    if (sigaction(sig, &sa, nullptr) != 0)
      PENTAD_FATAL(std::string("sigaction(") + strsignal(sig) + "): " + std::strerror(errno));
}

bool signal_received() { return g_signal != 0; }

}  // namespace pentad
