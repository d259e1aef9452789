// Stop signals: blocked from main()'s start, then caught (see signals.h).
#include "train/signals.h"

#include <signal.h>
#include <unistd.h>
#include <atomic>
#include <csignal>

namespace xsagpt {

namespace {

std::atomic<int> g_signal{0};

// What Slurm sends before a time limit when asked (--signal=USR2@90): USR1 may be caught
// by NCCL, so schedulers' tools (submitit) ask for USR2. HUP: the terminal or ssh session
// went away: save, like a preemption.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR2};

void on_signal(int sig) {
  if (g_signal.exchange(sig) != 0) _exit(128 + sig);  // second signal: give up now
}

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kStopSignals) sigaddset(&set, s);
  return set;
}

void set_action(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (int s : kStopSignals) sigaction(s, &sa, nullptr);
}

}  // namespace

void block_stop_signals() {
  const auto set = stop_set();
  sigprocmask(SIG_BLOCK, &set, nullptr);
}

void install_stop_handlers() {
  set_action(on_signal);
  const auto set = stop_set();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);  // one that arrived while blocked is caught now
  ignore_broken_pipes();
}

void stop_on_signals_now() {
  set_action(SIG_DFL);
  const auto set = stop_set();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  if (const int sig = g_signal.load()) std::raise(sig);
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
