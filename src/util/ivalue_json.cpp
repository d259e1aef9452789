#include "util/ivalue_json.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>

namespace xsagpt {

c10::IValue json_to_ivalue(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return c10::IValue();
    case nlohmann::json::value_t::boolean: return c10::IValue(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return c10::IValue(j.get<int64_t>());
    case nlohmann::json::value_t::number_float: return c10::IValue(j.get<double>());
    case nlohmann::json::value_t::string: return c10::IValue(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      c10::impl::GenericList list(c10::AnyType::get());
      for (const auto& e : j) list.push_back(json_to_ivalue(e));
      return c10::IValue(list);
    }
    case nlohmann::json::value_t::object: {
      c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
      for (const auto& [k, v] : j.items()) dict.insert(k, json_to_ivalue(v));
      return c10::IValue(dict);
    }
    default: throw std::runtime_error("json_to_ivalue: unsupported JSON value " + j.dump());
  }
}

nlohmann::json ivalue_to_json(const c10::IValue& v) {
  if (v.isNone()) return nullptr;
  if (v.isBool()) return v.toBool();
  if (v.isInt()) return v.toInt();
  if (v.isDouble()) return v.toDouble();
  if (v.isString()) return v.toStringRef();
  if (v.isList()) {
    auto out = nlohmann::json::array();
    for (const auto& e : v.toListRef()) out.push_back(ivalue_to_json(e));
    return out;
  }
  if (v.isTuple()) {
    auto out = nlohmann::json::array();
    for (const auto& e : v.toTupleRef().elements()) out.push_back(ivalue_to_json(e));
    return out;
  }
  if (v.isGenericDict()) {
    auto out = nlohmann::json::object();
    for (const auto& kv : v.toGenericDict()) out[kv.key().toStringRef()] = ivalue_to_json(kv.value());
    return out;
  }
  throw std::runtime_error("ivalue_to_json: unsupported value of type " + v.tagKind());
}

}  // namespace xsagpt
