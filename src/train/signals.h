// SIGINT/SIGTERM/SIGHUP/SIGUSR2 handling for preemptible jobs: the first signal asks the run
// to finish its current step, save a checkpoint and exit 0; a second one exits at
// once. SIGPIPE is ignored: stderr piped into `head` that exits must not kill a run.
#pragma once

namespace xsagpt {

void install_stop_handlers();  // also ignore_broken_pipes()
void ignore_broken_pipes();
bool stop_requested();
int stop_signal();  // the signal received, 0 if none

}  // namespace xsagpt
