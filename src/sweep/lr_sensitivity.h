// Sweeps, a ladder's sensitivity to the rate: with lr_multipliers every variant trains at
// several rates per rung, and how much its loss moves across them is a finding of its own
// (a variant that wins only at its best rate, and loses badly a factor 2 away, is harder to
// use at a scale where the rate cannot be tuned). Wortsman et al. 2023 ("Small-scale proxies
// for large-scale Transformer training instabilities", arXiv 2309.14322, section 2.2)
// report it as the final loss against the rate, and summarise that curve by the "LR
// sensitivity": the expected deviation from the best loss over the rates tried,
//   E_eta [ min(l(eta), l0) - min_eta' l(eta') ],
// l0 the loss at initialization, which caps a diverged or worse-than-initial run. The
// expectation here is the mean over the multipliers tried (Wortsman's rates are a grid
// too). l(eta) is a rate's mean final val loss over its seeds, each seed capped at l0;
// l0 is ln(model.vocab_size), the cross-entropy of the uniform prediction, which a freshly
// initialized model gives to within its small logits; a seed that diverged (its loss not
// finite, or its run stopped on a non-finite loss) counts as l0.
#pragma once

#include "sweep/grid.h"
#include "sweep/text_table.h"

#include <string>
#include <vector>

namespace xsagpt {

// summary.json's ladder "lr_sensitivity" (a ladder with lr_multipliers):
//   {variant: [{"rung": name, "values": the other grid keys' values (the seed aside; {} without), "l0": ln(vocab_size),
//               "rates": [{"lr_mult", "lr", "loss" (mean over its seeds, each capped at l0; null
//                          without any), "n" (seeds counted), "diverged" (of them)}],
//               "spread" (max - min of the rates' losses), "sensitivity" (Wortsman's, above),
//               or, where a rate has no seed finished or diverged yet, both null and "why"}]}
json lr_sensitivity(const Sweep& sweep, const json& points);

// The report's table of it: a row per variant, rung and setting of the other keys, a column per multiplier, then the
// spread and the sensitivity; and a note per row without them.
TextTable lr_sensitivity_table(const json& sensitivity, std::vector<std::string>& notes);

}  // namespace xsagpt
