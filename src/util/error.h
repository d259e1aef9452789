// The error every layer throws for bad configuration (a config file, a CLI flag,
// an environment variable): its message names the key or flag and what was
// expected, and the CLI turns it into exit code 2. It lives at the bottom of the
// layers (docs/architecture.md) so that util, data and dist can throw it without
// reaching up into config/.
#pragma once

#include <stdexcept>

namespace xsagpt {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace xsagpt
