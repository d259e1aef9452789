// Precompiled header: LibTorch and the other heavy third-party headers. Keeping
// them here keeps an incremental rebuild on a 2-core machine to seconds.
#pragma once
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>
