// A place where a test can hold this process: when $XSAGPT_TEST_STOP_AT names the
// point, the process stops itself (SIGSTOP) there, and the test, seeing it stopped,
// starts a second process before continuing this one (SIGCONT). Races between
// processes (two trainers creating one run directory) become deterministic tests.
// Elsewhere it costs one getenv.
#pragma once

namespace xsagpt {

void stop_here_for_tests(const char* point);

}  // namespace xsagpt
