// JSON <-> c10::IValue, so configs and loader states travel inside checkpoints
// as plain nested dicts/lists that Python's torch.load shows as dict and list.
#pragma once

#include <ATen/core/ivalue.h>
#include <nlohmann/json.hpp>

namespace xsagpt {

c10::IValue json_to_ivalue(const nlohmann::json& j);
nlohmann::json ivalue_to_json(const c10::IValue& v);

}  // namespace xsagpt
