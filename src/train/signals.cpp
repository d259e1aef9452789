#include "train/signals.h"

#include <unistd.h>
#include <atomic>
#include <csignal>

namespace xsagpt {

namespace {

std::atomic<int> g_signal{0};

void on_signal(int sig) {
  if (g_signal.exchange(sig) != 0) _exit(128 + sig);  // second signal: give up now
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // the terminal or ssh session went away: save, like a preemption
  // What Slurm sends before a time limit when asked (--signal=USR2@90): USR1 may be
  // caught by NCCL, so schedulers' tools (submitit) ask for USR2.
  sigaction(SIGUSR2, &sa, nullptr);
  ignore_broken_pipes();
}

void ignore_broken_pipes() {
  // A console write to a closed pipe then fails with EPIPE, which the loggers drop,
  // instead of killing the process; files are written with their own error checks.
  struct sigaction sa {};
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
}

bool stop_requested() { return g_signal.load() != 0; }
int stop_signal() { return g_signal.load(); }

}  // namespace xsagpt
