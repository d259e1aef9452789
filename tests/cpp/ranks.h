// Two or more Gloo ranks as threads of one test process, for the c10d context's
// collectives (test_distributed.cpp) and the sharded optimizer (test_zero.cpp).
#pragma once

#include "distributed/launch_env.h"
#include "distributed/process_group.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace xsagpt::test {

inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  close(fd);
  return ntohs(a.sin_port);
}

// Runs body(rank, context) on `world` ranks, one thread each; rethrows the first failure.
inline void run_ranks(int world, const std::function<void(int, ProcessGroupContext&)>& body, double timeout_s = 30) {
  // c10d's flight recorder (on by default, 2000 entries) is one per process, shared by
  // every process group in it: with ranks as threads of one process, torch 2.11's
  // recorder crashed now and then inside the map insert of
  // FlightRecorder::recordWithResetEnabled when several groups recorded at once (a
  // SIGSEGV in about one in 50 runs of ShardedAdamWTest). A real run has one rank per
  // process; here the recorder is switched off (a buffer of 0 entries) before any group
  // exists.
  setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/1);
  const int port = free_port();
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        torch::set_num_threads(1);
        LaunchEnv env{.launcher = "test", .rank = r, .world_size = world, .master_addr = "127.0.0.1", .master_port = port};
        DistOptions opts{"gloo", std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))};
        ProcessGroupContext ctx(env, opts);
        body(r, ctx);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace xsagpt::test
