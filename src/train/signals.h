// SIGINT/SIGTERM handling for preemptible jobs: the first signal asks the run to
// finish its current step, save a checkpoint and exit 0; a second one exits at once.
#pragma once

namespace xsagpt {

void install_stop_handlers();
bool stop_requested();
int stop_signal();  // the signal received, 0 if none

}  // namespace xsagpt
