// Which sweep file a directory belongs to (see sweep/sweep_claim.h).
#include "sweep/sweep_claim.h"

#include "util/atomic_file.h"

#include <fmt/format.h>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

// A sweep file without what may change while it stays the same sweep: out_dir (a sweep
// copied or moved elsewhere) and every "slurm" object (how jobs are scheduled).
json placeless(json spec) {
  if (!spec.is_object()) return spec;
  spec.erase("out_dir");
  spec.erase("slurm");
  if (spec.contains("ladder") && spec["ladder"].is_object() && spec["ladder"].contains("rungs") &&
      spec["ladder"]["rungs"].is_array())
    for (auto& r : spec["ladder"]["rungs"])
      if (r.is_object()) r.erase("slurm");
  return spec;
}

// Whether the directory's sweep.json is this very file (false: it says another place, or,
// forced, another sweep); ConfigError when it is another sweep file and not forced.
bool same_sweep_file(const Sweep& sweep, bool force) {
  const auto found = read_json_file(sweep.dir / "sweep.json");
  if (placeless(found) != placeless(sweep.spec) && !force)
    throw ConfigError(
        fmt::format("{} was made from a different sweep file; use another out_dir, or --force to "
                    "continue with the new one",
                    sweep.dir.string()));
  return found == sweep.spec;
}

}  // namespace

void claim_sweep_file(const Sweep& sweep, bool force, DistContext& dist) {
  const auto spec_file = sweep.dir / "sweep.json";
  const auto text = sweep.spec.dump(2) + "\n";
  if (fs::exists(spec_file)) {
    // Rewritten only when it says another place (a moved sweep) or, forced, another sweep.
    if (!same_sweep_file(sweep, force) && dist.is_main()) write_file_atomic_shared(spec_file, text);
    return;
  }
  if (!dist.is_main()) return;
  fs::create_directories(sweep.dir);
  // Any number of processes may start on a new sweep directory at once: the first to
  // create sweep.json writes it, and every other one checks it like an old one.
  if (!create_file_exclusive(spec_file, text) && !same_sweep_file(sweep, force))
    write_file_atomic_shared(spec_file, text);
}

void check_sweep_file(const Sweep& sweep) {
  if (fs::exists(sweep.dir / "sweep.json")) same_sweep_file(sweep, /*force=*/false);
}

}  // namespace xsagpt
