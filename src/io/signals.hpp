// Stop signals (signals.cpp; install_signal_handlers and signal_received are
// declared in checkpoint.hpp). SIGUSR1 and SIGTERM ask for a checkpoint at
// the end of the step and a clean exit; SIGINT (Ctrl-C: mpiexec forwards it
// to the ranks) asks for the same, but the run then exits non-zero, and a
// second SIGINT terminates the rank at once.
#pragma once

namespace pentad {

// Exit code of a run stopped by SIGINT (the shell's 128 + signal number).
constexpr int kInterruptedExitCode = 130;

// This rank has received SIGINT (async-signal-safe read).
bool interrupt_received();

}  // namespace pentad
