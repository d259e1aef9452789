// Config schema machinery. Each config struct lists its fields exactly once, in a
// static `fields(self, visitor)` function: JSON name, member, one-line help. The
// member initialisers are the single source of defaults; reading (with errors that
// name the key and what was expected), writing and the configuration reference (docs/config-reference.md)
// are all derived from that list, so they cannot drift apart.
#pragma once

#include "util/error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
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

inline void read_value(const json& v, int64_t& out, const std::string& key) {
  if (v.is_number_integer() || v.is_number_unsigned()) {
    out = v.get<int64_t>();
    return;
  }
  if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
    out = static_cast<int64_t>(v.get<double>());  // accept 2e3 for 2000
    return;
  }
  bad(key, "an integer", v);
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
    out.push_back(e.get<int64_t>());
  }
}
inline void read_value(const json& v, json& out, const std::string&) { out = v; }

template <class T>
json write_value(const T& v) {
  return json(v);
}

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
