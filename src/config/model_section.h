// Reading a `model` section into a ModelConfig: the fields through the schema
// (config/schema.h) and, beside them, the keys of the attention kinds
// (config/attention_kinds.h), which the schema's field list does not hold, resolved
// with model.attention into the config's AttentionSpec (a key of another kind or a
// value of the wrong type is refused here). The rest of the section is validated by
// model_config_from_json afterwards; run configs, `info --set` and eval's reports read
// their model sections through it and validate once they are whole.
#pragma once

#include "config/schema.h"

#include <string>

namespace xsagpt {

struct ModelConfig;  // config/model_config.h: declared, not included, so that neither header includes the other

void read_model_section(const json& j, ModelConfig& c, const std::string& where);

}  // namespace xsagpt
