// SIGINT/SIGTERM/SIGHUP/SIGUSR2 handling for preemptible jobs: the first signal asks the run to
// finish its current step, save a checkpoint and exit 0 (a sweep: exit 3, interrupted and
// resumable); a second one exits at once. SIGPIPE is ignored: stderr piped into `head` that
// exits must not kill a run.
//
// The commands that stop this way (train, sweep) catch the signals from their first moment:
// main() blocks them before anything else (a blocked signal stays pending, also across the
// exec by which the program may restart itself for OpenMP's settings), then installs the
// handlers, which unblocks them. A signal during start-up (the sweep file read, the points
// checked, the data or model loaded) is then a stop asked for, honoured at the first point or
// step, never the default action's death by signal. Only the loading of the program itself,
// before main(), is left to the default action (exit 128 + the signal), which the Slurm batch
// script treats as an interruption too (sweep/slurm_scripts.h).
#pragma once

namespace xsagpt {

void block_stop_signals();      // main(), first: the stop signals wait, blocked, for the handlers
void install_stop_handlers();   // installs the handlers, then unblocks; also ignore_broken_pipes()
void stop_on_signals_now();     // back to the default action (a command that never asks), and a
                                // signal caught before then takes it now
void ignore_broken_pipes();
bool stop_requested();
int stop_signal();  // the signal received, 0 if none

}  // namespace xsagpt
