// A run's number of ranks across a resume, as the run directory sees it: the start
// decision takes a checkpoint of another world size only with the same tokens per
// optimizer step and, refusing, writes nothing; a checkpoint carries the resumes that
// changed the number of ranks (and the validation set's size), and done.json made from
// it says so.
#include "helpers.h"
#include "run/run_start.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace xsagpt;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class RankChanges : public test::TempDirTest {
 protected:
  RunConfig config(int64_t micro_batch, int64_t batch_tokens, int64_t max_steps = 12) const {
    RunConfig c;
    c.model = test::small_model("sa");
    c.data.train = c.data.val = "unused/*.bin";
    c.train.seq_len = 32;
    c.train.micro_batch = micro_batch;
    c.train.batch_tokens = batch_tokens;
    c.train.max_steps = max_steps;
    c.out_dir = (tmp / "run").string();
    return c;
  }
  // A checkpoint saved by `ranks` ranks of micro_batch 4 x seq_len 32 (batch_tokens 0).
  fs::path save(int64_t step, int64_t ranks, std::vector<RankChange> changes = {}) const {
    Checkpoint c;
    c.step = step;
    c.tokens = step * 256;
    c.config = to_json(config(4, 0));
    c.model["w"] = torch::full({4}, 1.0f);
    c.data.loader = json::array();
    for (int64_t r = 0; r < ranks; ++r) c.data.loader.push_back({{"epoch", 0}});
    c.data.val_sequences = 24;
    c.progress.train_loss = c.progress.val_loss = 3.0;
    c.progress.rank_changes = std::move(changes);
    const auto path = checkpoint_path(tmp / "run", step);
    save_checkpoint(c, path);
    return path;
  }
};

namespace {

std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[e.path().string()] = test::slurp(e.path());
  return out;
}

}  // namespace

TEST_F(RankChanges, ACheckpointCarriesThemWithItsRanksAndValidationSize) {
  const std::vector<RankChange> changes{{4, 2, 1}, {8, 1, 3}};
  const auto c = load_checkpoint(save(8, 3, changes));
  EXPECT_EQ(c.data.ranks(), 3);
  EXPECT_EQ(c.data.val_sequences, 24);
  EXPECT_EQ(c.progress.rank_changes, changes);
  // Without a rank's loader state it says neither where the data stands nor how many ranks saved it:
  // the tools that read only its weights take it, a resume does not.
  Checkpoint none = c;
  none.data.loader = json::array();
  save_checkpoint(none, checkpoint_path(tmp / "run", 10));
  EXPECT_NO_THROW(load_checkpoint(checkpoint_path(tmp / "run", 10)));
  EXPECT_THAT(test::error_of<CheckpointError>([&] { open_run(config(4, 0), "auto", false, 3); }),
              HasSubstr("step_00000010.pt: loader: expected a loader state per rank, got []"));
}

TEST_F(RankChanges, AnotherWorldSizeIsTakenOnlyWithTheSameStepAndARefusalWritesNothing) {
  save(4, 2);
  const auto before = files_of(tmp / "run");
  // On one rank, micro_batch 4 makes a step of 128 tokens unless batch_tokens keeps 256.
  EXPECT_THAT(test::error_of<ConfigError>([&] { open_run(config(4, 0), "auto", false, 1); }),
              HasSubstr("step_00000004.pt: saved by 2 ranks, whose optimizer steps were 256 tokens"));
  EXPECT_EQ(files_of(tmp / "run"), before);
  const auto kept = open_run(config(4, 256), "auto", false, 1);
  ASSERT_TRUE(kept.checkpoint);
  EXPECT_EQ(kept.start.resume_step, 4);
  EXPECT_NO_THROW(open_run(config(2, 256), "auto", false, 4));
  EXPECT_NO_THROW(open_run(config(4, 0), "auto", false, 2));  // the same world: as always
  EXPECT_EQ(files_of(tmp / "run"), before);
}

TEST_F(RankChanges, DoneJsonMadeFromAFinishedCheckpointSaysSo) {
  save(12, 3, {{4, 2, 3}});  // 384 tokens a step: 4 x 32 x 3 ranks
  const auto cfg = config(2, 384);
  const auto opening = open_run(cfg, "auto", false, 2);  // reported on any number of ranks that keeps the step
  ASSERT_TRUE(opening.finished && opening.record_done);
  close_finished_run(cfg, opening);
  const auto done = read_json_file(tmp / "run" / "done.json");
  EXPECT_EQ(done["rank_changes"], json::parse(R"([{"step": 4, "from": 2, "to": 3}])"));
  EXPECT_EQ(RunSummary::from_json(done).rank_changes, (std::vector<RankChange>{{4, 2, 3}}));
  // A run that kept its ranks has no such key.
  EXPECT_FALSE((RunSummary{12, 3072, 3.0, 3.0, 1.0}.to_json().contains("rank_changes")));
}
