// The run directory of a training session (see run_dir.h): the lock, the order of
// the start decision, staging, commit and finish, and which rank does the file work.
#include "run/run_dir.h"

#include "config/config_diff.h"
#include "run/run_staging.h"
#include "util/test_stop.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace xsagpt {

namespace fs = std::filesystem;

namespace {

// One owner per run directory (util/dir_lock.h): a directory that exists at start is
// locked there; one that does not is claimed when the run creates it, so a second
// trainer that decided to create the same directory meanwhile finds it there and is
// refused: whoever loses gets DirBusy ("out_dir ... is in use"), never a share of it.
DirLock lock_run_dir(const RunPaths& p) {
  return DirLock::acquire(p.dir, "train", [&](const std::string& holder) {
    return fmt::format(
        "out_dir {} is in use: {} trains in it (it holds {}). Wait for it to finish, or stop it (it saves a "
        "checkpoint) and continue with --resume auto",
        p.dir.string(), holder, p.lock.string());
  });
}

DirLock lock_new_run_dir(const RunPaths& p) {
  return DirLock::create(p.dir, "train", [&](const std::string& holder) {
    return fmt::format(
        "out_dir {} is in use: it did not exist when this trainer started, and {} has made it since. Nothing was "
        "changed: once that run is done or stopped, continue it with --resume auto, or choose another --out",
        p.dir.string(), holder);
  });
}

}  // namespace

template <class LockFn>
void RunDir::take_lock(LockFn&& lock_fn) {
  std::string error;
  bool busy = false;
  if (dist_.is_main()) {
    try {
      lock_ = lock_fn(paths_);
    } catch (const DirBusy& e) {
      error = e.what();
      busy = true;
    } catch (const std::exception& e) {  // e.g. a directory this user cannot write
      error = e.what();
    }
  }
  if (!dist_.any(!error.empty())) return;
  const bool any_busy = dist_.any(busy);  // the same exception on every rank: a sweep goes on alike
  if (error.empty()) error = fmt::format("out_dir {}: cannot be locked (see rank 0)", cfg_.out_dir);
  if (any_busy) throw DirBusy(error);
  throw ConfigError(error);
}

RunDir::RunDir(const RunConfig& cfg, const std::string& resume, bool overwrite, DistContext& dist, bool same_config,
               const std::string& branch_from)
    : cfg_(cfg), dist_(dist), paths_(cfg.out_dir) {
  existed_ = dist.any(dist.is_main() && fs::is_directory(paths_.dir));  // rank 0 decides
  if (existed_) take_lock(lock_run_dir);
  if (dist.is_main() && lock_.held()) recover_staged_run(paths_.dir);  // a session killed before its commit
  std::string foreign;
  if (same_config && dist.is_main() && fs::exists(paths_.config)) {
    std::optional<std::string> diff;
    try {
      diff = config_difference(read_json_file(paths_.config), to_json(cfg));
    } catch (const std::exception& e) {
      diff = e.what();
    }
    if (diff)
      foreign = fmt::format("{} holds a run of another config ({}): not this run's; nothing of it was changed",
                            paths_.config.string(), *diff);
  }
  if (dist.any(!foreign.empty()))
    throw ForeignRun(foreign.empty() ? fmt::format("out_dir {} holds another run (see rank 0)", cfg.out_dir) : foreign);
  dist.barrier();
  opening_ = open_run(cfg, resume, overwrite, dist.world_size(), branch_from);
}

RunDir::~RunDir() {
  if (!begun_ || abandoned_ || !dist_.is_main()) return;
  try {
    recover_staged_run(paths_.dir);
  } catch (const std::exception& e) {
    spdlog::warn("{}: {}", paths_.dir.string(), e.what());
  }
}

std::optional<RunSummary> RunDir::close_if_finished() {
  if (opening_.finished && dist_.is_main()) close_finished_run(cfg_, opening_);
  return opening_.finished;
}

std::string RunDir::restore(const std::function<void(const Checkpoint&, const std::string&)>& load) {
  if (auto& ck = opening_.checkpoint) {
    load(*ck, opening_.start.checkpoint->string());
    ck.reset();  // free the host copy of the weights
  }
  return opening_.start.run_id;  // the checkpoint's, or the directory's for an older one
}

fs::path RunDir::begin() {
  dist_.barrier();  // every rank has read the run directory and passed every check
  stop_here_for_tests("train:before-creating-out-dir");
  if (!existed_) take_lock(lock_new_run_dir);
  fs::path metrics;
  if (dist_.is_main()) {
    metrics = prepare_run_dir(paths_.dir, cfg_, opening_.start);
    begun_ = true;
  }
  dist_.barrier();
  return metrics;
}

void RunDir::commit(int64_t step) {
  if (!dist_.is_main()) return;
  commit_staged_run(paths_.dir);  // a resumed run replaces the finished one only from here on
  spdlog::info("saved {}", checkpoint_path(paths_.dir, step).string());
}

void RunDir::finish(const RunSummary& summary) {
  if (dist_.is_main()) finish_run(paths_.dir, summary);
}

}  // namespace xsagpt
