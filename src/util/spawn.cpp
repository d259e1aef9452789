// posix_spawnp with an argument vector (see spawn.h).
#include "util/spawn.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

extern char** environ;

namespace xsagpt {

namespace {

int wait_for_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Starts argv[0] (found on PATH) with our environment, its standard output on
// `stdout_fd` (-1: ours); -1 when it cannot start.
pid_t start_program(const std::vector<std::string>& argv, int stdout_fd) {
  if (argv.empty()) return -1;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

}  // namespace

int run_program(const std::vector<std::string>& argv, bool stdout_to_stderr) {
  const pid_t pid = start_program(argv, stdout_to_stderr ? STDERR_FILENO : -1);
  return pid < 0 ? -1 : wait_for_child(pid);
}

int run_program_output(const std::vector<std::string>& argv, std::string& out) {
  out.clear();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;  // the child keeps only the write end, as its stdout
  const pid_t pid = start_program(argv, fds[1]);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return -1;
  }
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  return wait_for_child(pid);
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path || name.empty() || name.find('/') != std::string::npos) return "";
  const std::string dirs = path;
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const auto file = std::filesystem::path(dir) / name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(file, ec) && ::access(file.c_str(), X_OK) == 0) return file.string();
    start = end + 1;
  }
  return "";
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=,:+@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace xsagpt
