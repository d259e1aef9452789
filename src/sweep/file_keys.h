// The machinery behind the sweep file's declared sections (sweep/sweep_file.h), in
// config/schema.h's way: a section is a struct whose static fields(self, visitor) lists
// each key once, as (JSON name, member, help[, Key]); the member's initialiser is its
// default. Reading (each value's type, unknown keys, required keys) and the sections'
// tables in docs/ come from that list alone. What a value must be beyond its type (a
// time limit, a count in range, a name) is checked by the code that reads the section,
// after read().
//
// A sweep file nests JSON the code reads further (the grid, a rung, a rule): such a key
// is a `json` member whose Key names its shape ("an object", "a list", ...), which the
// reader checks for an object or a list and the docs print as its type.
#pragma once

#include "config/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace xsagpt::file_keys {

// What a key's declaration says beyond its name, member and help: what it must be, in
// words with their article (a `json` member needs it; others are named by their type),
// and whether the section needs it (no default: refused by name when absent).
struct Key {
  const char* shape = nullptr;
  bool required = false;
};

template <class T>
std::string expected(const T&) {
  if constexpr (std::is_same_v<T, bool>)
    return "true or false";
  else if constexpr (std::is_integral_v<T>)
    return "an integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "a number";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return "a list of strings";
  else if constexpr (std::is_same_v<T, std::vector<double>>)
    return "a list of numbers";
  else if constexpr (std::is_enum_v<T>)
    return schema::enum_choices<T>();
  else
    return "a JSON value";
}
template <class T>
std::string expected(const std::optional<T>&) {
  return expected(T{});
}

// Read into a member. A `json` member takes any value of its shape: an object where it
// is declared "an object...", a list where "a list...".
template <class T>
void read_value(const json& v, T& out, const std::string& key, const std::string& shape) {
  if constexpr (std::is_same_v<T, json>) {
    if ((shape.starts_with("an object") && !v.is_object()) || (shape.starts_with("a list") && !v.is_array()))
      schema::bad(key, shape, v);
    out = v;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!v.is_array()) schema::bad(key, shape, v);
    out.clear();
    for (const auto& e : v) {
      if (!e.is_string()) schema::bad(key, shape, e);  // the element that is not one
      out.push_back(e.get<std::string>());
    }
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    if (!v.is_array()) schema::bad(key, shape, v);
    out.clear();
    for (const auto& e : v) {
      if (!e.is_number()) schema::bad(key, shape, e);
      out.push_back(e.get<double>());
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) schema::bad(key, shape, v);
    out = v.get<std::string>();
  } else {
    schema::read_value(v, out, key);
  }
}
template <class T>
void read_value(const json& v, std::optional<T>& out, const std::string& key, const std::string& shape) {
  out.emplace();
  read_value(v, *out, key, shape);
}

// Reads the object `j` into `section`. A key's message name is where + sep + key
// (`sweep.json: base`, `sweep.json: slurm.nodes`). A key not declared is refused with
// the declared ones; a required key that is absent is refused with its help, unless
// `overrides` (a section read over another's values, as a rung's "slurm" over the
// sweep's, which has them).
template <class S>
void read(const json& j, S& section, const std::string& where, const std::string& sep = ".", bool overrides = false) {
  if (!j.is_object()) schema::bad(where, "an object", j);
  std::vector<std::string> known;
  S::fields(section, [&](const char* name, auto& member, const char* help, Key key = {}) {
    known.push_back(name);
    const std::string at = where + sep + name;
    const std::string shape = key.shape ? key.shape : expected(member);
    if (const auto it = j.find(name); it != j.end())
      read_value(*it, member, at, shape);
    else if (key.required && !overrides)
      throw ConfigError(fmt::format("{}: required: {}", at, help));
  });
  for (const auto& [k, v] : j.items())
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      std::string names;
      for (const auto& n : known) names += (names.empty() ? "" : ", ") + n;
      throw ConfigError(fmt::format("{}: unknown key '{}' (known: {})", where, k, names));
    }
}

// A default as the docs show it: "required", "-" where there is none (absent, an empty
// name), or its JSON.
template <class T>
std::string default_text(const T& v, const Key& key) {
  if (key.required) return "required";
  if constexpr (std::is_same_v<T, json>) {
    return v.is_null() ? "-" : "`" + v.dump() + "`";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.empty() ? "-" : "`" + json(v).dump() + "`";
  } else {
    return "`" + schema::write_value(v).dump() + "`";
  }
}
template <class T>
std::string default_text(const std::optional<T>& v, const Key& key) {
  return v ? default_text(*v, key) : key.required ? "required" : "-";
}

// Markdown rows "| `prefix<key>` | type | default | meaning |" of a section's keys.
template <class S>
std::string reference_rows(const std::string& prefix) {
  S defaults{};
  std::ostringstream out;
  S::fields(defaults, [&](const char* name, auto& member, const char* help, Key key = {}) {
    std::string type = key.shape ? key.shape : expected(member);
    for (const char* article : {"a ", "an "})
      if (type.starts_with(article)) type = type.substr(std::string(article).size());
    out << "| `" << prefix << name << "` | " << type << " | " << default_text(member, key) << " | " << help << " |\n";
  });
  return out.str();
}

}  // namespace xsagpt::file_keys
