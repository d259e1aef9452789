// Every file of a run directory, named in one place, so that the code that decides how
// a run starts, stages a resumed session, commits it and finishes it agrees on them:
//
//   config.json             resolved config of the run (written at start)
//   metrics.jsonl           see run/metrics.h
//   metrics.jsonl.damaged   lines a resume left out of the history, kept byte for byte
//   checkpoints/            see run/checkpoint.h
//   done.json               written once the run reached train.max_steps (run/done_json.h)
//   run.json                {"run_id": ...}, made at a fresh start; every checkpoint
//                           carries it, and --resume auto refuses one that does not; a
//                           branch's also says where it branched off ("branched_from":
//                           run, checkpoint, step, run_id: run/run_start.h)
//   .lock                   the trainer's lock (util/dir_lock.h)
//   staged.json, config.json.staged, metrics.jsonl.staged, metrics.jsonl.damaged.staged
//                           a resumed session's files until its first checkpoint
//                           commits them (run/run_staging.h)
//
// Whole-file writes go through <name>.tmp (util/atomic_file.h): a kill mid-write leaves
// that, which the next session removes.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <vector>

namespace xsagpt {

struct RunPaths {
  explicit RunPaths(const std::filesystem::path& dir);

  std::filesystem::path dir, config, metrics, damaged_metrics, checkpoints, done, run_id, lock;
  std::filesystem::path staged_marker, staged_config, staged_metrics, staged_damaged;

  // The staged files, the marker first (without it the others are only leftovers).
  std::vector<std::filesystem::path> staged() const;
  // What holds the run's own history (cleared when a run starts over in the directory).
  std::vector<std::filesystem::path> history() const;
};

// Where util/atomic_file.h writes `file` before renaming it into place.
std::filesystem::path temporary(const std::filesystem::path& file);

// A JSON file of the run directory, or null when it is missing or unreadable: each
// was written whole by a trainer, so an unreadable one was cut by hand or by a full
// disk, and its readers treat it as saying nothing.
nlohmann::json read_run_file(const std::filesystem::path& file);

}  // namespace xsagpt
