// run/metrics_history.h: metrics.jsonl read back, on hand-written histories whose
// answers are worked out here by hand (records as src/run/metrics.h writes them: an
// evaluation's line once it has finished, after the train line of its step).
#include "helpers.h"
#include "run/metrics_history.h"

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
  std::optional<double> median_step_time(const std::filesystem::path& f) { return read_metrics(f).median_step_time(); }
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

TEST_F(StepTimes, EachLineIsARecordOrDamagedAndTheValCurveKeepsARestartsRecords) {
  const auto f = history(R"({"step":0,"time_s":1.0,"val_loss":7.0}
{"step":10,"time_s":2.0,"train_loss":5.0}
garbage
{"step":10,"time_s":3.0,"val_loss":5.5}
{"step":-1,"val_loss":1.0}
{"step":20,"time_s":4.0,"val_loss":NaN}
{"step":10,"time_s":0.5,"val_loss":5.4}
{"step":20,"time_s":1.5,"val_loss":4.9})"
                         "\n{\"step\":30,\"time_s\":2.5,\"train_lo");
  const auto h = read_metrics(f);
  EXPECT_EQ(h.records.size(), 5u);
  EXPECT_EQ(h.damaged, (std::vector<int64_t>{3, 5, 6, 9}));  // a negative step is never the trainer's
  ASSERT_TRUE(h.nonfinite.has_value());
  EXPECT_EQ(*h.nonfinite, 6);
  std::vector<std::pair<int64_t, double>> curve;
  for (const auto& r : h.val_curve()) curve.push_back({r.step, *r.number("val_loss")});
  // The restart at step 10 replaced the first run's step 10; step 0 stays.
  EXPECT_EQ(curve, (std::vector<std::pair<int64_t, double>>{{0, 7.0}, {10, 5.4}, {20, 4.9}}));
  EXPECT_EQ(h.val_loss_at(10).value_or(0), 5.4);  // the last logged at that step
  EXPECT_EQ(h.train_loss_at(10).value_or(0), 5.0);
  EXPECT_FALSE(h.train_loss_at(20).has_value());
  // The fast tail read agrees: the last whole record's step (the torn line is not one).
  EXPECT_EQ(last_logged_step(f).value_or(-1), 20);
  EXPECT_FALSE(last_logged_step(tmp / "absent.jsonl").has_value());
  EXPECT_TRUE(read_metrics(tmp / "absent.jsonl").records.empty());
}
