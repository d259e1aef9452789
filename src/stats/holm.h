// Holm's step-down adjustment of p-values for a family of tests (Holm 1979, "A simple
// sequentially rejective multiple test procedure"): several variants tested against one
// baseline are m tests, and the smallest of m p-values falls below 0.05 by chance far
// more often than one p-value does. Holm's adjusted p-values keep the family-wise error
// rate at the level they are read at, for any dependence between the tests, and are never
// larger than Bonferroni's (m p).
//
// With the p-values sorted ascending, p_(1) <= ... <= p_(m), the adjusted value of the
// i-th is max over j <= i of min(1, (m - j + 1) p_(j)): the running maximum keeps the
// adjusted values in the order of the raw ones (tied raw values get equal adjusted ones),
// and the cap keeps them probabilities. Written here because none of the chosen
// dependencies has it (statsmodels' multipletests(method="holm") is the usual Python
// one); tests/python/sweep/test_holm.py checks it against the procedure's definition in float64.
//
// Where it is used: every variant of a sweep, a ladder or `xsagpt eval` is tested against
// the same baseline, so at one setting (or rung, or task) and on one measure the variants'
// tests are one family. Each test object of the family gains the adjusted value beside its
// own p and the family's size m, which the reports name ("Holm across m variants").
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

// The Holm-adjusted p-values, in the order given. An empty entry (a test that could not
// be made: one seed, no spread) is no member of the family: it stays empty and does not
// count in m, the number of p-values given.
std::vector<std::optional<double>> holm_adjust(const std::vector<std::optional<double>>& p);

// m: how many of `p` hold a value (the family's size that holm_adjust used).
size_t holm_family_size(const std::vector<std::optional<double>>& p);

// The same over a family of tests held as JSON objects whose `p_key` is a number (null, or
// absent, where no test was made): sets `p_key` + "_holm" (null where `p_key` is) and
// "holm_m" in each.
void holm_across(const std::vector<nlohmann::json*>& tests, const std::string& p_key = "p");

}  // namespace xsagpt
