// cxxopts as every command uses it. cxxopts splits the values of list options at
// commas; `--set` values hold commas of their own (data.train's glob lists,
// train.kernels' kernel lists), so here a value is never split: a list option is
// given once per item. Every file includes cxxopts through this header, so the
// library's templates see one delimiter.
#pragma once

#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>
