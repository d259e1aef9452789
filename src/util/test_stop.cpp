// Test stop points (see test_stop.h).
#include "util/test_stop.h"

#include <csignal>
#include <cstdlib>
#include <cstring>

namespace xsagpt {

void stop_here_for_tests(const char* point) {
  const char* at = std::getenv("XSAGPT_TEST_STOP_AT");
  if (at && std::strcmp(at, point) == 0) std::raise(SIGSTOP);
}

}  // namespace xsagpt
