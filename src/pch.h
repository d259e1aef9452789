// Precompiled header: LibTorch and the other heavy third-party headers. Keeping
// them here keeps an incremental rebuild on a 2-core machine to seconds.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <spdlog/fmt/fmt.h>
#include <filesystem>
#include <string>
#include <vector>
#include <optional>
