// Reading a `model` section into a ModelConfig without validating it: the fields
// through the schema (config/schema.h) and, beside them, the options of the attention
// kinds (config/attention_kinds.h), which the schema's field list does not hold. It is
// what model_config_from_json does before it validates; run configs, `info --set` and
// eval's reports read their model sections through it and validate once they are whole.
#pragma once

#include "config/model_config.h"

#include <string>

namespace xsagpt {

void read_model_section(const json& j, ModelConfig& c, const std::string& where);

}  // namespace xsagpt
