// Branches of a ladder's longest budgets (see branch.h).
#include "sweep/branch.h"

#include "run/checkpoint.h"

namespace xsagpt {

namespace fs = std::filesystem;

fs::path branch_checkpoint(const Sweep& sweep, const SweepPoint& p) {
  const auto& budget = sweep.ladder->rungs[p.rung].budgets[p.budget];
  return checkpoint_path(sweep.points[*p.branch_of].config.out_dir, budget.branch_step);
}

bool branch_ready(const Sweep& sweep, const SweepPoint& p) {
  if (!p.branch_of) return true;
  return fs::exists(branch_checkpoint(sweep, p)) || !list_checkpoints(p.config.out_dir).empty();
}

}  // namespace xsagpt
