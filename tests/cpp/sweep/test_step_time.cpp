// sweep/step_time.h: a run's median seconds per step, on hand-written histories whose
// answer is worked out here by hand (records as src/run/metrics.h writes them: an
// evaluation's line once it has finished, after the train line of its step).
#include "helpers.h"
#include "sweep/step_time.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace xsagpt;

class StepTimes : public test::TempDirTest {
 protected:
  std::filesystem::path history(const std::string& text) {
    const auto f = tmp / "metrics.jsonl";
    std::ofstream(f) << text;
    return f;
  }
};

TEST_F(StepTimes, ARunShorterThanItsLogIntervalIsTimedFromItsFirstEvaluation) {
  // 61 steps, one train record: before, no interval and so no step time at all.
  const auto f = history(R"({"step":0,"time_s":0.5,"val_loss":7.6}
{"step":61,"time_s":2.33,"train_loss":5.1}
{"step":61,"time_s":2.9,"val_loss":4.4}
)");
  const auto t = median_step_time(f);
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(*t, (2.33 - 0.5) / 61, 1e-15);
}

TEST_F(StepTimes, AnIntervalHoldingAnEvaluationIsLeftOutAndARestartReplacesWhatFollowed) {
  // 0.1 s a step throughout, the evaluation at step 20 taking 5 s; a run killed after
  // step 30 restarts from step 20 with its clock at 0 and steps of 0.2 s.
  const auto f = history(R"({"step":0,"time_s":1.0,"val_loss":7.0}
{"step":10,"time_s":2.0,"train_loss":5.0}
{"step":20,"time_s":3.0,"train_loss":4.5}
{"step":20,"time_s":8.0,"val_loss":4.6}
{"step":30,"time_s":9.0,"train_loss":4.2}
{"step":20,"time_s":0.5,"val_loss":4.6}
{"step":30,"time_s":2.5,"train_loss":4.2}
{"step":40,"time_s":4.5,"train_loss":4.0}
)");
  // Kept: 0->10 and 10->20 at 0.1 s; then the restart's 20->30 and 30->40 at 0.2 s. The
  // first run's 20->30 (after its evaluation) is replaced; no interval spans the 5 s evaluation.
  const auto t = median_step_time(f);
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(*t, 0.5 * (0.1 + 0.2), 1e-12);
}

TEST_F(StepTimes, NoTrainRecordAfterAnotherRecordGivesNone) {
  EXPECT_FALSE(median_step_time(history(R"({"step":0,"time_s":0.5,"val_loss":7.6}
)")).has_value());
  EXPECT_FALSE(median_step_time(history("")).has_value());
}
