// Config schema machinery. Each config struct lists its fields exactly once, in a
// static `fields(self, visitor)` function: JSON name, member, one-line help. The
// member initialisers are the single source of defaults; reading (with errors that
// name the key and what was expected), writing and the configuration reference (docs/config-reference.md)
// are all derived from that list, so they cannot drift apart.
//
// A key with a fixed set of string values is an enum class E: its header defines
// `enum_names(E)`, found by argument-dependent lookup, returning the one table of
// (value, JSON name) pairs. Configs, checkpoints and --set keep the names; the
// program compares the enum, so a value is spelled once.
#pragma once

#include "util/error.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace xsagpt {

using json = nlohmann::json;

namespace schema {

inline std::string show(const json& v) {
  auto s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

[[noreturn]] inline void bad(const std::string& key, const std::string& expected, const json& got) {
  throw ConfigError(key + ": expected " + expected + ", got " + show(got));
}

// Every integer field, whatever its width, is read here: a value its type cannot
// hold (18446744073709551615 into an int64_t, 4294967298 into an int) is refused
// naming the key, never wrapped around into another number.
template <std::integral T>
requires(!std::same_as<T, bool>) T read_integer(const json& v, const std::string& key) {
  constexpr auto lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  auto range = [&] { bad(key, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", v); };
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(hi)) range();
    return static_cast<T>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) {
    const auto x = v.get<int64_t>();
    if (x < static_cast<int64_t>(lo) || x > static_cast<int64_t>(hi)) range();
    return static_cast<T>(x);
  }
  if (!v.is_number_float() || v.get<double>() != std::floor(v.get<double>())) bad(key, "an integer", v);
  // Accept 2e3 for 2000. Every double below 2^63 in magnitude converts to an int64_t.
  const double x = v.get<double>();
  if (!(x >= -0x1p63 && x < 0x1p63) || static_cast<int64_t>(x) < static_cast<int64_t>(lo) ||
      static_cast<int64_t>(x) > static_cast<int64_t>(hi))
    range();
  return static_cast<T>(x);
}

template <std::integral T>
requires(!std::same_as<T, bool>) void read_value(const json& v, T& out, const std::string& key) {
  out = read_integer<T>(v, key);
}
inline void read_value(const json& v, double& out, const std::string& key) {
  if (!v.is_number()) bad(key, "a number", v);
  out = v.get<double>();
}
inline void read_value(const json& v, bool& out, const std::string& key) {
  if (!v.is_boolean()) bad(key, "true or false", v);
  out = v.get<bool>();
}
inline void read_value(const json& v, std::string& out, const std::string& key) {
  if (!v.is_string()) bad(key, "a string", v);
  out = v.get<std::string>();
}
inline void read_value(const json& v, std::vector<int64_t>& out, const std::string& key) {
  if (!v.is_array()) bad(key, "a list of integers", v);
  out.clear();
  for (const auto& e : v) {
    if (!e.is_number_integer()) bad(key, "a list of integers", v);
    out.push_back(read_integer<int64_t>(e, key));
  }
}
inline void read_value(const json& v, json& out, const std::string&) { out = v; }

// The names of enum E's values, quoted and joined: "\"sa\" or \"xsa\"".
template <class E>
std::string enum_choices() {
  const auto& names = enum_names(E{});
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + "\"" + names[i].second + "\"";
  return out;
}

// The value of E named `name`; ConfigError naming `key` and the choices otherwise.
template <class E>
E enum_from_name(std::string_view name, const std::string& key) {
  for (const auto& [value, n] : enum_names(E{}))
    if (name == n) return value;
  bad(key, enum_choices<E>(), json(std::string(name)));
}

template <class E>
requires std::is_enum_v<E>
const char* enum_name(E value) {
  for (const auto& [v, n] : enum_names(E{}))
    if (v == value) return n;
  return "?";  // unreachable for a value of the table
}

template <class E>
requires std::is_enum_v<E>
void read_value(const json& v, E& out, const std::string& key) {
  if (!v.is_string()) bad(key, enum_choices<E>(), v);
  out = enum_from_name<E>(v.get<std::string>(), key);
}

template <class T>
json write_value(const T& v) {
  return json(v);
}
template <class E>
requires std::is_enum_v<E> json write_value(const E& v) { return json(enum_name(v)); }

// Reads `j` into `cfg`. Keys not listed by Cfg::fields are an error; absent keys
// keep their defaults. `where` is the dotted prefix used in messages.
template <class Cfg>
void read(const json& j, Cfg& cfg, const std::string& where) {
  if (!j.is_object()) bad(where, "a JSON object", j);
  std::set<std::string> known;
  Cfg::fields(cfg, [&](const char* name, auto& member, const char*) {
    known.insert(name);
    if (auto it = j.find(name); it != j.end()) read_value(*it, member, where + "." + name);
  });
  for (const auto& [k, v] : j.items()) {
    if (known.count(k)) continue;
    std::ostringstream names;
    for (const auto& n : known) names << (names.tellp() ? ", " : "") << n;
    throw ConfigError(where + ": unknown key '" + k + "' (known keys: " + names.str() + ")");
  }
}

template <class Cfg>
json write(const Cfg& cfg) {
  json j = json::object();
  Cfg::fields(const_cast<Cfg&>(cfg),
              [&](const char* name, auto& member, const char*) { j[name] = write_value(member); });
  return j;
}

// Markdown rows "| section.key | default | meaning |" for docs/config-reference.md.
template <class Cfg>
std::string reference_rows(const std::string& section) {
  Cfg defaults{};
  std::ostringstream out;
  Cfg::fields(defaults, [&](const char* name, auto& member, const char* help) {
    out << "| `" << section << "." << name << "` | `" << write_value(member).dump() << "` | " << help << " |\n";
  });
  return out.str();
}

}  // namespace schema
}  // namespace xsagpt
