// Running another program (the plotting script) without a shell: the arguments go
// to it as a vector, so paths with spaces, quotes or `;` are passed as they are and
// never interpreted as commands.
#pragma once

#include <string>
#include <vector>

namespace xsagpt {

// Runs argv[0] (searched in PATH when it has no '/') with argv, waits for it and
// returns its exit status; -1 if it could not be started, 128+N if killed by
// signal N. With stdout_to_stderr its standard output goes to our stderr.
int run_program(const std::vector<std::string>& argv, bool stdout_to_stderr = false);

// `s` quoted for a POSIX shell (for messages that show a command to copy).
std::string shell_quote(const std::string& s);

}  // namespace xsagpt
