// Sweeps, which sweep file a directory belongs to. A sweep directory keeps the sweep
// file it was made from (sweep.json); a process with another sweep file must not train
// into it, nor rewrite its summary and report from points the other file does not
// name (they would all read as invalid). out_dir and the Slurm settings (where the
// sweep lives, how its jobs are scheduled, never what they train) may differ.
#pragma once

#include "distributed/context.h"
#include "sweep/grid.h"

namespace xsagpt {

// Makes `sweep.dir` this sweep file's: writes sweep.json when there is none (any number
// of processes may race to), refuses one made from another sweep file unless forced,
// then records the new file. Only rank 0 writes.
void claim_sweep_file(const Sweep& sweep, bool force, DistContext& dist);

// ConfigError when `sweep.dir` holds a sweep.json of another sweep file; writes nothing.
void check_sweep_file(const Sweep& sweep);

}  // namespace xsagpt
