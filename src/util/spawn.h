// Running another program (the plotting script, Slurm's commands) without a shell: the arguments go
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

// As run_program, with the program's standard output captured into `out` (its
// standard error stays ours): for asking a scheduler's commands (sbatch, squeue).
int run_program_output(const std::vector<std::string>& argv, std::string& out);

// The file `name` (without '/') would run as, searched in PATH as posix_spawnp does;
// empty when it is in no folder of PATH or not executable there.
std::string find_on_path(const std::string& name);

// `s` quoted for a POSIX shell (for messages that show a command to copy).
std::string shell_quote(const std::string& s);

}  // namespace xsagpt
