// xsagpt_ladder_analysis: sweep/ladder_analysis.h on ladders from stdin, for the
// simulation of its intervals' coverage (scripts/study/coverage.py), which needs the
// analysis itself on thousands of made-up ladders rather than a sweep of real runs.
//
// Input (JSON):  {"ladders": [{"observations": [{"variant", "rung", "seed", "compute", "loss"}, ...],
//                              "baseline": name, "variants": [names], "bootstrap": replicates,
//                              "rng_seed": n}, ...]}
// Output (JSON): {"analyses": [the analysis of each ladder, the Huber fits left out]}
#include "sweep/ladder_analysis.h"

#include <nlohmann/json.hpp>

#include <iostream>

int main() {
  using nlohmann::json;
  const json in = json::parse(std::cin);
  json out = {{"analyses", json::array()}};
  for (const auto& ladder : in.at("ladders")) {
    std::vector<xsagpt::LadderObservation> obs;
    for (const auto& o : ladder.at("observations"))
      obs.push_back({o.at("variant").get<std::string>(), o.at("rung").get<int>(), o.at("seed").get<int64_t>(),
                     o.at("compute").get<double>(), o.at("loss").get<double>()});
    xsagpt::LadderOptions opt;
    opt.baseline = ladder.at("baseline").get<std::string>();
    opt.variants = ladder.at("variants").get<std::vector<std::string>>();
    opt.bootstrap = ladder.value("bootstrap", 2000);
    opt.rng_seed = ladder.value("rng_seed", uint64_t{0});
    opt.huber = false;
    out["analyses"].push_back(xsagpt::ladder_analysis(obs, opt));
  }
  std::cout << out.dump() << "\n";
  return 0;
}
