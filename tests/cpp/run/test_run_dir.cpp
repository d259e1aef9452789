// Nothing is lost: atomic writes that fail cleanly on a full disk, metrics that
// never end mid-line, and a run directory that is checked before it is touched and
// never mixes two runs. Write failures are injected with RLIMIT_FSIZE (writes past
// the limit fail with EFBIG, as they would with ENOSPC on a full disk), so these
// run without root; tests/python/run/test_nothing_lost.py fills a real tmpfs.
#include "helpers.h"
#include "run/metrics.h"
#include "run/metrics_history.h"
#include "run/run_dir.h"
#include "run/run_staging.h"
#include "run/run_start.h"
#include "util/atomic_file.h"
#include "util/dir_lock.h"
#include "util/torch_save.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>
#include <algorithm>
#include <csignal>
#include <fstream>
#include <sstream>

using namespace xsagpt;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

// Files written by this process may not grow past `bytes` while it lives.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
    rlimit l = old_;
    l.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

void spit(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

class RunDirFiles : public test::TempDirTest {
 protected:
  RunConfig config(const fs::path& out, int64_t max_steps) const {
    RunConfig c;
    c.model = test::small_model("sa");
    c.data.train = "unused/*.bin";
    c.data.val = "unused/*.bin";
    c.train.max_steps = max_steps;
    c.out_dir = out.string();
    return c;
  }
  // A small but real checkpoint of a run in `out` at `step`.
  fs::path checkpoint(const fs::path& out, int64_t step, int64_t max_steps, double train_loss = NAN,
                      double val_loss = NAN) const {
    Checkpoint c;
    c.step = step;
    c.tokens = step * 100;
    c.progress.elapsed_s = 1.5 * static_cast<double>(step);
    c.config = to_json(config(out, max_steps));
    c.model["w"] = torch::full({4}, static_cast<float>(step));
    c.data.loader = json::array({json::object()});
    c.progress.train_loss = train_loss;
    c.progress.val_loss = val_loss;
    const auto path = checkpoint_path(out, step);
    save_checkpoint(c, path);
    return path;
  }
  void metrics_lines(const fs::path& out, int64_t last) const {
    MetricsLog log(out / "metrics.jsonl");
    for (int64_t s = 0; s <= last; ++s) {
      log.write({{"step", s}, {"train_loss", 10.0 - static_cast<double>(s)}});
      if (s % 4 == 0) log.write({{"step", s}, {"val_loss", 20.0 - static_cast<double>(s)}});
    }
  }
};

// ---- atomic writes ------------------------------------------------------------

TEST_F(RunDirFiles, FailedAtomicWriteKeepsThePreviousFileAndLeavesNoTemporary) {
  const auto f = tmp / "config.json";
  write_file_atomic(f, "old\n");
  const std::string big(4096, 'x');
  std::string err;
  {
    FileSizeLimit limit(1000);
    err = test::error_of<WriteError>([&] { write_file_atomic(f, big); });
  }
  EXPECT_THAT(err, HasSubstr(f.string() + ": cannot write: File too large"));
  EXPECT_EQ(test::slurp(f), "old\n");
  EXPECT_EQ(names_in(tmp), std::vector<std::string>{"config.json"});
}

// The stream writer threw again from its destructor on a short write: the program
// died (std::terminate) with the partial .tmp left on the full disk.
TEST_F(RunDirFiles, CheckpointOnAFullDiskIsAnErrorNamingTheFileNotACrash) {
  const auto f = checkpoint_path(tmp, 3);
  torch_save(c10::IValue(torch::arange(8)), f);
  const auto before = test::slurp(f);
  std::string err;
  {
    FileSizeLimit limit(64 * 1024);
    err = test::error_of<SaveError>([&] { torch_save(c10::IValue(torch::zeros({1 << 18})), f); });  // 1 MiB of floats
  }
  EXPECT_THAT(err, HasSubstr(f.string() + ": cannot write: File too large"));
  EXPECT_THAT(err, HasSubstr("partial file was removed and nothing was replaced"));
  EXPECT_EQ(names_in(f.parent_path()), std::vector<std::string>{f.filename().string()});
  EXPECT_EQ(test::slurp(f), before);
  EXPECT_TRUE(torch::equal(torch_load(f).toTensor(), torch::arange(8)));
  // And through save_checkpoint, as the trainer calls it.
  {
    FileSizeLimit limit(64 * 1024);
    Checkpoint c;
    c.model["w"] = torch::zeros({1 << 18});
    err = test::error_of<CheckpointError>([&] { save_checkpoint(c, checkpoint_path(tmp, 6)); });
  }
  EXPECT_THAT(err, HasSubstr(checkpoint_path(tmp, 6).string() + ": cannot write"));
  EXPECT_EQ(names_in(f.parent_path()), std::vector<std::string>{f.filename().string()});
}

// ---- metrics.jsonl ------------------------------------------------------------

// Write errors were ignored: later lines silently dropped, the file cut mid-line.
TEST_F(RunDirFiles, MetricsWriteFailureStopsWithANamedErrorAndLeavesWholeLines) {
  const auto f = tmp / "metrics.jsonl";
  std::string err;
  int64_t written = 0;
  {
    FileSizeLimit limit(1000);
    MetricsLog log(f);
    err = test::error_of<MetricsError>([&] {
      for (; written < 1000; ++written) log.write({{"step", written}, {"train_loss", 1.0 / 3.0}, {"lr", 6e-4}});
    });
  }
  EXPECT_THAT(err, HasSubstr(f.string() + ": cannot write: File too large"));
  EXPECT_THAT(err, HasSubstr("the run stops at step " + std::to_string(written)));
  const auto text = test::slurp(f);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::istringstream in(text);
  int64_t n = 0;
  for (std::string line; std::getline(in, line); ++n) EXPECT_EQ(json::parse(line)["step"], n);
  EXPECT_EQ(n, written);  // every line reported written is there, whole
}

TEST_F(RunDirFiles, MetricsHistoryIsRewrittenOnlyAtomically) {
  const auto f = tmp / "metrics.jsonl";
  metrics_lines(tmp, 9);
  spit(f, test::slurp(f) + "{\"step\": 10, \"train_lo");  // a line cut off by a kill
  const auto before = test::slurp(f);
  std::string err;
  {
    FileSizeLimit limit(20);  // smaller than what is kept: the rewrite fails
    err = test::error_of<MetricsError>([&] { truncate_metrics(f, 4); });
  }
  EXPECT_THAT(err, HasSubstr(f.string() + ": cannot write: File too large"));
  EXPECT_EQ(test::slurp(f), before);
  EXPECT_EQ(names_in(tmp), std::vector<std::string>{"metrics.jsonl"});

  truncate_metrics(f, 4);
  std::istringstream in(test::slurp(f));
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);) steps.push_back(json::parse(line)["step"]);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 0, 1, 2, 3, 4, 4}));
  const auto history = read_metrics(f);
  EXPECT_EQ(history.train_loss_at(4).value_or(NAN), 6.0);
  EXPECT_EQ(history.val_loss_at(4).value_or(NAN), 16.0);
  EXPECT_FALSE(history.val_loss_at(3));
}

TEST_F(RunDirFiles, DamagedMetricsLinesAreReturnedByteForByteWithTheirNumbers) {
  const auto f = tmp / "metrics.jsonl";
  const std::string nul("\0\0", 2);
  spit(f, "{\"step\": 1}\ngarbage\n{\"step\": 2}\n" + nul + "\n[1]\n{\"step\": \"3\"}\n{\"step\": 5}\n{\"step\": 3");
  const auto cut = truncate_metrics(f, 4);
  EXPECT_EQ(cut.damaged_lines, (std::vector<int64_t>{2, 4, 5, 6, 8}));
  EXPECT_EQ(cut.damaged, "garbage\n" + nul + "\n[1]\n{\"step\": \"3\"}\n{\"step\": 3\n");
  EXPECT_EQ(cut.last_step, 2);
  EXPECT_EQ(test::slurp(f), "{\"step\": 1}\n{\"step\": 2}\n");  // step 5 is past the checkpoint: dropped
  EXPECT_EQ(line_ranges({1, 2, 3, 5, 7, 8}), "1-3, 5, 7-8");
  EXPECT_EQ(line_ranges({}), "");
}

TEST_F(RunDirFiles, ANewRunDirectoryBelongsToWhoeverCreatedIt) {
  const auto busy = [](const std::string& holder) { return "in use: " + holder; };
  const auto dir = tmp / "a" / "run";
  auto first = DirLock::create(dir, "train", busy);
  ASSERT_TRUE(first.held());
  // The same directory again, created or locked: refused naming the holder.
  const std::string holder = fmt::format("in use: pid {} on host ", ::getpid());
  EXPECT_THAT(test::error_of<DirBusy>([&] { DirLock::create(dir, "train", busy); }), HasSubstr(holder));
  EXPECT_THAT(test::error_of<DirBusy>([&] { DirLock::acquire(dir, "sweep", busy); }),
              AllOf(HasSubstr(holder), HasSubstr("(xsagpt train), since ")));
  first = DirLock();  // released
  EXPECT_TRUE(DirLock::acquire(dir, "train", busy).held());
  // A directory someone made without locking it yet is theirs too.
  fs::create_directories(tmp / "b");
  EXPECT_EQ(test::error_of<DirBusy>([&] { DirLock::create(tmp / "b", "train", busy); }), "in use: another process");
}

// ---- checkpoints --------------------------------------------------------------

TEST_F(RunDirFiles, CheckpointsAreListedByStepNumber) {
  fs::create_directories(tmp / "checkpoints");
  for (const char* n :
       {"step_100000000.pt", "step_00000005.pt", "step_99999999.pt", "other.pt", "step_x.pt", "step_00000007.pt.tmp"})
    spit(tmp / "checkpoints" / n, "");
  std::vector<int64_t> steps;
  for (const auto& p : list_checkpoints(tmp)) steps.push_back(checkpoint_step(p));
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 99999999, 100000000}));
}

// A zip names each record twice, in its local header (first in the file) and in the
// central directory (last). One bit flipped in the first copy, the record's bytes and
// CRC intact: PyTorch's reader, which finds records by the central directory, would
// load it; the checkpoint is refused as one failing its CRC is, by the rule
// scripts/eval/export.py applies too (util/zip_check.h).
TEST_F(RunDirFiles, ARecordNamedDifferentlyInItsTwoHeadersIsRefused) {
  const auto path = checkpoint(tmp, 4, 8);
  ASSERT_NO_THROW(load_checkpoint(path));
  std::string bytes = test::slurp(path);
  const std::string record = "archive/data/0";
  const auto local = bytes.find(record);
  ASSERT_NE(local, std::string::npos);
  ASSERT_NE(bytes.rfind(record), local);       // the central directory's copy, left as it is
  bytes[local + record.find("data")] ^= 0x01;  // "data" -> "eata"
  spit(path, bytes);
  EXPECT_THAT(test::error_of<CheckpointError>([&] { load_checkpoint(path); }),
              HasSubstr(path.string() + ": corrupt checkpoint, its bytes changed since it was written: record '" +
                        record + "': its local header names it 'archive/eata/0'"));
}

// PyTorch writes the central directory's size, offset and record count twice, in the
// end-of-central-directory record and in the zip64 end record, and its reader and
// Python's zipfile read the zip64 copy: one changed byte in the other copy is a
// changed file all the same, refused by one rule here and in export.py alike.
TEST_F(RunDirFiles, AnEndRecordDisagreeingWithItsZip64TwinIsRefused) {
  const auto path = checkpoint(tmp, 4, 8);
  std::string bytes = test::slurp(path);
  const auto eocd = bytes.rfind(std::string("PK\x05\x06", 4));
  ASSERT_NE(eocd, std::string::npos);
  ASSERT_NE(bytes.rfind(std::string("PK\x06\x06", 4)), std::string::npos);  // the zip64 end record
  bytes[eocd + 12] ^= 0x01;                                                 // the directory's size
  spit(path, bytes);
  EXPECT_THAT(test::error_of<CheckpointError>([&] { load_checkpoint(path); }),
              HasSubstr(path.string() + ": corrupt checkpoint, its bytes changed since it was written: the "
                                        "end-of-central-directory record gives the central directory's size as "));
}

// ---- starting a run: decided and checked before anything is written ----------

TEST_F(RunDirFiles, AFreshStartNeverReusesADirectoryHoldingARun) {
  const auto run = tmp / "run";
  EXPECT_FALSE(open_run(config(run, 10), "", false, 1).start.clear);
  checkpoint(run, 4, 10);
  EXPECT_THAT(test::error_of<ConfigError>([&] { open_run(config(run, 10), "", false, 1); }),
              HasSubstr("out_dir " + run.string() + " already holds a run (checkpoints up to step 4)"));
  EXPECT_TRUE(open_run(config(run, 10), "", true, 1).start.clear);
  EXPECT_TRUE(fs::exists(checkpoint_path(run, 4)));  // deciding wrote nothing
}

// --resume PATH into a directory with another run exited 0, cut that run's metrics,
// overwrote its done.json and pruned the new checkpoints as "older".
TEST_F(RunDirFiles, ResumingAnotherRunsCheckpointIntoARunIsRefusedNamingBoth) {
  const auto base = tmp / "base", mix = tmp / "mix";
  const auto from = checkpoint(base, 5, 40);
  for (int64_t s : {38, 39, 40}) checkpoint(mix, s, 40, 1.0, 2.0);
  metrics_lines(mix, 41);
  write_file_atomic(mix / "done.json", "{}\n");
  const auto before = test::slurp(mix / "metrics.jsonl");

  const auto err = test::error_of<ConfigError>([&] { open_run(config(mix, 12), from.string(), false, 1); });
  EXPECT_THAT(err, HasSubstr("out_dir " + mix.string() + " already holds another run (checkpoints up to step 40"));
  EXPECT_THAT(err, HasSubstr(from.string() + " is a checkpoint of " + base.string()));
  EXPECT_THAT(err, HasSubstr("--overwrite"));

  // With --overwrite: a clean continuation in which nothing of the other run remains.
  const auto cfg = config(mix, 12);
  auto run = open_run(cfg, from.string(), true, 1);
  ASSERT_TRUE(run.checkpoint);
  EXPECT_TRUE(run.start.clear);
  EXPECT_EQ(test::slurp(mix / "metrics.jsonl"), before);  // still untouched
  prepare_run_dir(mix, cfg, run.start);
  EXPECT_EQ(names_in(mix), (std::vector<std::string>{"config.json", "run.json"}));  // run.json: the run's id
  EXPECT_EQ(read_json_file(mix / "config.json"), to_json(cfg));
  EXPECT_TRUE(fs::exists(from));
}

TEST_F(RunDirFiles, ResumingAnOlderCheckpointOfTheSameRunNeedsOverwriteThenDropsWhatFollowed) {
  const auto run = tmp / "run";
  for (int64_t s : {4, 8, 12}) checkpoint(run, s, 20);
  metrics_lines(run, 13);
  const auto err =
      test::error_of<ConfigError>([&] { open_run(config(run, 20), checkpoint_path(run, 4).string(), false, 1); });
  EXPECT_THAT(err, HasSubstr("is step 4 of the run in " + run.string() + ", which has checkpoints up to step 12"));

  const auto cfg = config(run, 20);
  auto opening = open_run(cfg, checkpoint_path(run, 4).string(), true, 1);
  EXPECT_TRUE(opening.start.rewind);
  EXPECT_FALSE(opening.start.clear);
  const auto history = test::slurp(run / "metrics.jsonl");
  prepare_run_dir(run, cfg, opening.start);
  EXPECT_EQ(names_in(run / "checkpoints"), std::vector<std::string>{"step_00000004.pt"});
  EXPECT_EQ(test::slurp(run / "metrics.jsonl"), history);  // staged: replaced only once a new checkpoint lands
  commit_staged_run(run);
  std::istringstream in(test::slurp(run / "metrics.jsonl"));
  int64_t last = -1;
  for (std::string line; std::getline(in, line);) last = json::parse(line)["step"];
  EXPECT_EQ(last, 4);

  // The newest checkpoint (--resume auto, or its path) needs no flag.
  EXPECT_EQ(open_run(cfg, "auto", false, 1).start.resume_step, 4);
  EXPECT_FALSE(open_run(cfg, checkpoint_path(run, 4).string(), false, 1).start.rewind);
}

// A run killed between its final checkpoint and done.json could never be finished:
// "already finished ... nan" and still no done.json.
TEST_F(RunDirFiles, AFinishedRunWithoutDoneJsonGetsOneWithItsRealLosses) {
  const auto run = tmp / "run";
  checkpoint(run, 12, 12, 3.25, 3.5);
  metrics_lines(run, 12);
  const auto cfg = config(run, 12);
  auto opening = open_run(cfg, "auto", false, 1);
  ASSERT_TRUE(opening.finished);
  EXPECT_TRUE(opening.record_done);
  close_finished_run(cfg, opening);
  const auto done = read_json_file(run / "done.json");
  EXPECT_EQ(done["step"], 12);
  EXPECT_EQ(done["tokens"], 1200);
  EXPECT_EQ(done["final_train_loss"], 3.25);  // from the checkpoint
  EXPECT_EQ(done["final_val_loss"], 3.5);
  EXPECT_EQ(done["wall_s"], 18.0);

  // Done already: left as it is.
  write_file_atomic(run / "done.json", R"({"step": 12, "final_train_loss": 1.0, "final_val_loss": 2.0})");
  opening = open_run(cfg, "auto", false, 1);
  EXPECT_FALSE(opening.record_done);
  EXPECT_EQ(opening.finished->final_train_loss, 1.0);

  // A checkpoint of an older version, without losses: they come from metrics.jsonl.
  fs::remove(run / "done.json");
  checkpoint(run, 12, 12);
  opening = open_run(cfg, "auto", false, 1);
  close_finished_run(cfg, opening);
  EXPECT_EQ(read_json_file(run / "done.json")["final_train_loss"], 10.0 - 12);
  EXPECT_EQ(read_json_file(run / "done.json")["final_val_loss"], 20.0 - 12);

  // Another run's finished checkpoint into an empty directory: reported, nothing written.
  const auto other = tmp / "other";
  opening = open_run(config(other, 12), checkpoint_path(run, 12).string(), false, 1);
  ASSERT_TRUE(opening.finished);
  EXPECT_FALSE(opening.record_done);
  close_finished_run(config(other, 12), opening);
  EXPECT_FALSE(fs::exists(other));
}

// A failed resume deleted done.json and rewrote config.json with rejected settings.
TEST_F(RunDirFiles, APreparationThatFailsLeavesAFinishedRunFinished) {
  const auto run = tmp / "run";
  const auto cfg12 = config(run, 12);
  checkpoint(run, 12, 12, 3.0, 3.0);
  metrics_lines(run, 12);
  prepare_run_dir(run, cfg12, RunStart{});
  finish_run(run, {12, 1200, 3.0, 3.0, 18.0});
  const auto done = test::slurp(run / "done.json"), config_json = test::slurp(run / "config.json");

  const auto cfg20 = config(run, 20);
  auto opening = open_run(cfg20, "auto", false, 1);
  ASSERT_FALSE(opening.finished);
  EXPECT_EQ(opening.start.resume_step, 12);
  std::string err;
  {
    FileSizeLimit limit(100);  // the metrics history and config.json cannot be written
    err = test::error_of<std::exception>([&] { prepare_run_dir(run, cfg20, opening.start); });
  }
  EXPECT_THAT(err, HasSubstr("File too large"));
  EXPECT_EQ(test::slurp(run / "done.json"), done);
  EXPECT_EQ(test::slurp(run / "config.json"), config_json);
  EXPECT_THAT(names_in(run), Not(::testing::Contains(::testing::EndsWith(".tmp"))));

  EXPECT_THAT(names_in(run), Not(::testing::Contains(::testing::HasSubstr("staged"))));

  // Prepared, the resumed run is staged: the finished run stays as it was until the
  // session's first checkpoint commits it (a failure in between changes nothing).
  prepare_run_dir(run, cfg20, opening.start);
  EXPECT_EQ(test::slurp(run / "done.json"), done);
  EXPECT_EQ(test::slurp(run / "config.json"), config_json);
  recover_staged_run(run);  // a session that never saved a checkpoint: its staged files go
  EXPECT_EQ(names_in(run), (std::vector<std::string>{"checkpoints", "config.json", "done.json", "metrics.jsonl"}));
  prepare_run_dir(run, cfg20, opening.start);
  checkpoint(run, 16, 20, 2.0, 2.0);
  recover_staged_run(run);  // killed after its first checkpoint, before the commit: completed
  EXPECT_FALSE(fs::exists(run / "done.json"));
  EXPECT_EQ(read_json_file(run / "config.json")["train"]["max_steps"], 20);
}

TEST_F(RunDirFiles, PreparingRemovesTemporariesOfAKilledSave) {
  const auto run = tmp / "run";
  checkpoint(run, 4, 10);
  spit(run / "checkpoints" / "step_00000008.pt.tmp", "partial");
  spit(run / "config.json.tmp", "partial");
  spit(run / "notes.tmp", "the user's");
  const auto cfg = config(run, 10);
  prepare_run_dir(run, cfg, open_run(cfg, "auto", false, 1).start);
  EXPECT_EQ(names_in(run / "checkpoints"), std::vector<std::string>{"step_00000004.pt"});
  EXPECT_EQ(names_in(run), (std::vector<std::string>{"checkpoints", "config.json.staged", "metrics.jsonl.staged",
                                                     "notes.tmp", "staged.json"}));
  commit_staged_run(run);
  EXPECT_EQ(names_in(run),
            (std::vector<std::string>{"checkpoints", "config.json", "metrics.jsonl", "notes.tmp", "run.json"}));
}

// ---- RunDir: the run directory as train() holds it ---------------------------

TEST_F(RunDirFiles, ASessionEndingBeforeItsFirstCheckpointLeavesTheFinishedRunAsItWas) {
  const auto run = tmp / "run";
  const auto cfg12 = config(run, 12), cfg20 = config(run, 20);
  checkpoint(run, 12, 12, 3.0, 3.0);
  metrics_lines(run, 12);
  prepare_run_dir(run, cfg12, RunStart{});
  finish_run(run, {12, 1200, 3.0, 3.0, 18.0});
  const auto done = test::slurp(run / "done.json"), config_json = test::slurp(run / "config.json");
  DistContext single;
  {
    RunDir session(cfg20, "auto", false, single);
    EXPECT_FALSE(session.close_if_finished());
    session.begin();
    EXPECT_TRUE(fs::exists(run / "staged.json"));
    // Held for the object's life: a second trainer is refused before it reads anything.
    EXPECT_THAT(test::error_of<DirBusy>([&] { RunDir(cfg20, "auto", false, single); }),
                HasSubstr("out_dir " + run.string() + " is in use"));
  }  // ended (an error, a kill) before a checkpoint: what it staged goes
  EXPECT_EQ(test::slurp(run / "done.json"), done);
  EXPECT_EQ(test::slurp(run / "config.json"), config_json);
  EXPECT_THAT(names_in(run), Not(::testing::Contains(HasSubstr("staged"))));

  // A session whose checkpoint landed replaces the finished run from its commit on.
  {
    RunDir session(cfg20, "auto", false, single);
    session.begin();
    checkpoint(run, 16, 20, 2.0, 2.0);
    session.commit(16);
  }
  EXPECT_FALSE(fs::exists(run / "done.json"));
  EXPECT_EQ(read_json_file(run / "config.json")["train"]["max_steps"], 20);
  EXPECT_THAT(names_in(run), Not(::testing::Contains(HasSubstr("staged"))));
}

TEST_F(RunDirFiles, ANewDirectoryIsMadeOnlyOnceEveryCheckPassed) {
  const auto run = tmp / "new" / "run";
  const auto cfg = config(run, 10);
  DistContext single;
  RunDir session(cfg, "", false, single);
  EXPECT_FALSE(fs::exists(tmp / "new"));  // deciding wrote nothing
  EXPECT_EQ(session.begin(), run / "metrics.jsonl");
  EXPECT_EQ(read_json_file(run / "config.json"), to_json(cfg));
  EXPECT_EQ(recorded_run_id(run).size(), 32u);
}
