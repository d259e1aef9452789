// Where the project's own files are at run time: the folder holding configs/ and
// scripts/, found from the executable (build/xsagpt -> the checkout) so the
// program works from any current directory.
#pragma once

#include <filesystem>
#include <optional>

namespace xsagpt {

std::optional<std::filesystem::path> project_root();

}  // namespace xsagpt
