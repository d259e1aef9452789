// Staging and committing: how a session makes the run directory what it continues
// from without ever leaving a run worse than it found it.
//
// A fresh run (or one started over) is written in place: config.json and run.json.
// A resumed run is staged: its config goes to config.json.staged and its metrics
// history (cut at the resumed step; a branch's is the run it branched off) to
// metrics.jsonl.staged, and staged.json marks
// them complete; config.json, metrics.jsonl and done.json stay as they were until the
// session's first checkpoint lands and commit_staged_run() renames the staged files
// into place and removes done.json. A resume that fails at any point before that (bad
// data, divergence, a full disk, a kill) leaves a finished run exactly as it was, and
// an unfinished one with its checkpoints and metrics. Every step of a commit can be
// repeated, so a session killed half way through it is completed by the next one
// (recover_staged_run), which runs under the directory's lock before anything else.
#pragma once

#include "config/run_config.h"
#include "run/run_start.h"

#include <filesystem>

namespace xsagpt {

// Creates the directory and makes it hold what the run continues from: clears it
// (with rewind drops the checkpoints past the resumed one), removes temporary files
// of a killed save, and writes or stages config.json. Call it only once everything
// that can be checked passed. Returns the file the run appends its metrics to.
std::filesystem::path prepare_run_dir(const std::filesystem::path& dir, const RunConfig& cfg, const RunStart& start);

// After a checkpoint landed: commits what prepare_run_dir staged (nothing if nothing
// is staged).
void commit_staged_run(const std::filesystem::path& dir);

// A session killed between its first checkpoint and the commit is committed now (its
// checkpoint is newer than the step it resumed from); staged files of a session that
// never reached a checkpoint are removed.
void recover_staged_run(const std::filesystem::path& dir);

}  // namespace xsagpt
