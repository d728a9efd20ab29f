// Stop signals (checkpoint.hpp, signals.hpp): SIGUSR1 / SIGTERM / SIGINT set
// a flag that the trainer polls every step; it agrees on it over the job,
// checkpoints and exits (0, or 130 after SIGINT). The handler only stores
// flags (async-signal-safe). SIGINT's handler runs once (SA_RESETHAND): the
// second Ctrl-C gets the default action and terminates the rank at once.
#include "io/signals.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "io/checkpoint.hpp"

namespace pentad {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_interrupt = 0;

extern "C" void pentad_on_signal(int sig) {
  g_signal = sig;
  if (sig == SIGINT) g_interrupt = 1;
}

void install(int sig, int flags) {
  struct sigaction sa {};
  sa.sa_handler = pentad_on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags;
  if (sigaction(sig, &sa, nullptr) != 0)
    PENTAD_FATAL(std::string("sigaction(") + strsignal(sig) + "): " + std::strerror(errno));
}

}  // namespace

void install_signal_handlers() {
  for (int sig : {SIGUSR1, SIGTERM}) install(sig, SA_RESTART);
  install(SIGINT, SA_RESTART | SA_RESETHAND);
}

bool signal_received() { return g_signal != 0; }

bool interrupt_received() { return g_interrupt != 0; }

}  // namespace pentad
