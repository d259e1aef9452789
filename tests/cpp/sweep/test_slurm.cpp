// The "slurm" section of a sweep file: every refusal names its key, a rung's settings
// override the sweep's, time limits read as sbatch reads them; the side-by-side wall
// time against schedules worked out by hand; the batch script's text.
#include "helpers.h"
#include "sweep/slurm_estimate.h"
#include "sweep/grid.h"
#include "sweep/slurm_queue.h"
#include "sweep/slurm_scripts.h"
#include "sweep_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

using namespace xsagpt;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

class SlurmSpecs : public test::SweepFiles {
 protected:
  // A sweep of two variants over two seeds, with this "slurm" section (null: none) and
  // these extra keys.
  std::string spec(const json& slurm, const json& extra = json::object()) const {
    json keys = {{"variants", {{"sa", json::object()}, {"xsa", {{"model.attention", "xsa"}}}}},
                 {"baseline", "sa"},
                 {"grid", {{"train.seed", {1, 2}}}},
                 {"slurm", slurm}};
    keys.update(extra);
    return SweepFiles::spec(keys).string();
  }
  std::string error_of(const json& slurm, const json& extra = json::object()) const {
    return test::error_of<ConfigError>([&] { load_sweep(spec(slurm, extra), 1); });
  }
  json ladder(const json& rung2) const {
    return {{"ladder",
             {{"rungs", {1, rung2}},
              {"aspect", 32},
              {"head_dim", 32},
              {"tokens", {{"per_param", 0.001}}},
              {"lr", {{"per_rung", {1e-3, 1e-3}}}}}}};
  }
};

TEST(SlurmTime, ReadsEverySbatchForm) {
  EXPECT_EQ(slurm_time_seconds("90"), 90 * 60);
  EXPECT_EQ(slurm_time_seconds("5:30"), 5 * 60 + 30);
  EXPECT_EQ(slurm_time_seconds("2:03:04"), 2 * 3600 + 3 * 60 + 4);
  EXPECT_EQ(slurm_time_seconds("2-12"), 2 * 86400 + 12 * 3600);
  EXPECT_EQ(slurm_time_seconds("1-02:30"), 86400 + 2 * 3600 + 30 * 60);
  EXPECT_EQ(slurm_time_seconds("1-00:00:10"), 86400 + 10);
  for (const auto* bad : {"", "1h", "1:2:3:4", "-5", "1-", "1-2:3:4:5", "a-1", " 5"})
    EXPECT_FALSE(slurm_time_seconds(bad).has_value()) << bad;
}

TEST_F(SlurmSpecs, ReadsTheSectionWithItsDefaults) {
  const auto s = load_sweep(spec({{"time", "1:00:00"}, {"partition", "gpu"}, {"extra", {"--exclusive"}}}), 1);
  ASSERT_TRUE(s.slurm.has_value());
  EXPECT_EQ(s.slurm->base.time_s, 3600);
  EXPECT_EQ(s.slurm->base.partition, "gpu");
  EXPECT_EQ(s.slurm->base.ranks(), 1);
  EXPECT_EQ(s.slurm->base.signal_s, 120);
  EXPECT_EQ(s.slurm->base.extra, std::vector<std::string>{"--exclusive"});
  EXPECT_FALSE(load_sweep(spec(nullptr), 1).slurm.has_value());
}

TEST_F(SlurmSpecs, RefusesBadKeysByName) {
  EXPECT_THAT(error_of({{"time", "10"}, {"gpus", 8}}), HasSubstr("slurm: unknown key 'gpus'"));
  EXPECT_THAT(error_of({{"time", "10"}, {"nodes", "2"}}), HasSubstr("slurm.nodes: expected an integer"));
  EXPECT_THAT(error_of({{"time", "10"}, {"nodes", 0}}), HasSubstr("slurm.nodes: expected an integer from 1"));
  EXPECT_THAT(error_of({{"time", 10}}), HasSubstr("slurm.time: expected a time limit"));
  EXPECT_THAT(error_of({{"time", "10 min"}}), HasSubstr("slurm.time: expected a time limit"));
  EXPECT_THAT(error_of({{"nodes", 1}}), HasSubstr("slurm.time: required"));
  EXPECT_THAT(error_of({{"time", "2"}, {"signal_s", 120}}), HasSubstr("slurm.signal_s: 120 s before a time limit of 120 s"));
  EXPECT_THAT(error_of({{"time", "10"}, {"extra", "--exclusive"}}), HasSubstr("slurm.extra: expected a list"));
  EXPECT_THAT(error_of({{"time", "10"}, {"extra", {"exclusive"}}}), HasSubstr("slurm.extra: expected a list"));
  EXPECT_THAT(error_of({{"time", "10"}, {"partition", "a b"}}), HasSubstr("slurm.partition: expected a name"));
  // sbatch's --signal takes at most 65535 seconds.
  EXPECT_THAT(error_of({{"time", "2-00:00:00"}, {"signal_s", 65536}}),
              HasSubstr("slurm.signal_s: expected an integer from 1 to 65535"));
  EXPECT_EQ(load_sweep(spec({{"time", "2-00:00:00"}, {"signal_s", 65535}}), 1).slurm->base.signal_s, 65535);
  EXPECT_THAT(error_of(json::array()), HasSubstr("slurm: expected an object"));
}

TEST_F(SlurmSpecs, ExtraLinesMayNotSetWhatTheScriptsSetThemselves) {
  const std::vector<std::pair<std::string, std::string>> refused{
      {"--job-name=mine", "sets --job-name"},  {"-J mine", "sets --job-name"},
      {"-Jmine", "sets --job-name"},           {"--job=mine", "sets --job-name"},  // getopt's prefix
      {"--array=0-3", "sets --array"},         {"-a 0-3", "sets --array"},
      {"--signal=USR1@60", "sets --signal"},   {"--time=5", "sets --time"},
      {"-t 5", "sets --time"},                 {"--exclusive --time 5", "sets --time"},  // two on one line
      {"-Ot 5", "sets --time"},                // a flag, then -t in one group
      {"--output=/tmp/x.out", "sets --output"}, {"-e err.txt", "sets --error"},
      {"--no-requeue", "sets --no-requeue"},   {"--open-mode=truncate", "sets --open-mode"},
      {"-D /tmp", "sets --chdir"},             {"--nodes=2", "sets --nodes"},
      {"-n 4", "sets --ntasks"},               {"--partition=gpu", "sets --partition"},
      {"--wrap=hostname", "sets --wrap"},      {"--wait", "sets --wait"}};
  for (const auto& [line, message] : refused) {
    const auto e = error_of({{"time", "10"}, {"extra", {"--exclusive", line}}});
    EXPECT_THAT(e, HasSubstr("slurm.extra: \"" + line + "\"")) << line;
    EXPECT_THAT(e, HasSubstr(message)) << line;
  }
  EXPECT_THAT(error_of({{"time", "10"}}, ladder({{"depth", 2}, {"slurm", {{"extra", {"--job-name=x"}}}}})),
              HasSubstr("ladder.rungs[1].slurm.extra: \"--job-name=x\": --job-name=x sets --job-name"));
  // Options of their own, and values that merely look like one: accepted as written.
  const std::vector<std::string> fine{"--gpus=8",          "--constraint=h100", "-C time",
                                      "-Cgpu-a",           "--time-min=5",      "--nodelist=n[1-2]",
                                      "--comment=\"-J x\"", "--exclusive # -J in a comment"};
  const auto s = load_sweep(spec({{"time", "10"}, {"extra", fine}}), 1);
  EXPECT_EQ(s.slurm->base.extra, fine);
}

TEST_F(SlurmSpecs, ARungOverridesTheSweepsSettings) {
  const auto s = load_sweep(spec({{"time", "10"}, {"cluster_nodes", 4}}, ladder({{"depth", 2}, {"slurm", {{"nodes", 2}, {"time", "20"}}}})), 1);
  ASSERT_EQ(s.slurm->rungs.size(), 2u);
  EXPECT_EQ(s.slurm->of_rung(0).nodes, 1);
  EXPECT_EQ(s.slurm->of_rung(0).time_s, 600);
  EXPECT_EQ(s.slurm->of_rung(1).nodes, 2);
  EXPECT_EQ(s.slurm->of_rung(1).time_s, 1200);
  EXPECT_EQ(s.slurm->cluster_nodes, 4);
  EXPECT_THAT(error_of({{"time", "10"}}, ladder({{"depth", 2}, {"slurm", {{"cluster_nodes", 2}}}})),
              HasSubstr("ladder.rungs[1].slurm.cluster_nodes: the cluster's nodes are the whole sweep's"));
  EXPECT_THAT(error_of({{"time", "10"}}, ladder({{"depth", 2}, {"slurm", {{"nodez", 2}}}})),
              HasSubstr("ladder.rungs[1].slurm: unknown key 'nodez'"));
  EXPECT_THAT(error_of(nullptr, ladder({{"depth", 2}, {"slurm", {{"nodes", 2}}}})),
              HasSubstr("ladder.rungs[1].slurm: overrides the sweep's \"slurm\" section, which it has not"));
  EXPECT_THAT(error_of({{"time", "10"}, {"cluster_nodes", 1}}, ladder({{"depth", 2}, {"slurm", {{"nodes", 2}}}})),
              HasSubstr("slurm.cluster_nodes: 1 node(s), fewer than the 2 a job of ladder.rungs[1] asks for"));
}

TEST(PackedWall, MatchesSchedulesWorkedOutByHand) {
  // Two nodes, one-node tasks of 3, 2 and 2 h: 3 and 2 start at once; the second 2 at 2 h, ending at 4.
  EXPECT_DOUBLE_EQ(packed_wall_seconds({{2, 1, 0}, {3, 1, 0}, {2, 1, 0}}, 2, {0}), 4);
  // The array's limit of one at a time: one after another.
  EXPECT_DOUBLE_EQ(packed_wall_seconds({{2, 1, 0}, {3, 1, 0}, {2, 1, 0}}, 2, {1}), 7);
  // A two-node task waits for both nodes; the short one-node tasks fill the other node meanwhile.
  // Longest first: 5 (2 nodes) runs 0-5; then 1 and 1 side by side, 5-6.
  EXPECT_DOUBLE_EQ(packed_wall_seconds({{1, 1, 0}, {5, 2, 1}, {1, 1, 0}}, 2, {0, 0}), 6);
  // Three nodes: the 2-node task beside a one-node task; 4 then 4 on the single node.
  EXPECT_DOUBLE_EQ(packed_wall_seconds({{4, 1, 0}, {5, 2, 1}, {4, 1, 0}}, 3, {0, 0}), 8);
  EXPECT_DOUBLE_EQ(packed_wall_seconds({}, 3, {0}), 0);
}

TEST(PackedWall, ABranchStartsOnlyOnceTheTaskItWaitsForEnded) {
  // Three nodes: a source of 5 h and its two branches of 1 h (sweep/branch.h) run after it, side
  // by side, ending at 6; beside them another source of 4 h. Without the dependency: 5.
  EXPECT_DOUBLE_EQ(packed_wall_seconds({{5, 1, 0}, {1, 1, 1, 0}, {1, 1, 1, 0}, {4, 1, 0}}, 3, {0, 0}), 6);
  EXPECT_DOUBLE_EQ(packed_wall_seconds({{5, 1, 0}, {1, 1, 1}, {1, 1, 1}, {4, 1, 0}}, 3, {0, 0}), 5);
  // One node: the branch waits for its source even where it would fit before it.
  EXPECT_DOUBLE_EQ(packed_wall_seconds({{1, 1, 0, 1}, {2, 1, 0}}, 1, {0}), 3);
}

TEST(SlurmScripts, EachTaskRunsItsPointUnderSrunAndRequeuesOnlyItself) {
  SlurmSettings s;
  s.time = "1:00:00";
  s.time_s = 3600;
  s.nodes = 2;
  s.ntasks_per_node = 4;
  s.gpus_per_node = 4;
  s.array_limit = 2;
  s.signal_s = 90;
  s.account = "proj";
  s.extra = {"--exclusive"};
  SlurmScriptContext ctx{"/opt/x sagpt", "/s/ladder.json", "/work", "/s/runs/slurm/logs", "xsagpt-ladder-00000001"};
  const auto text = slurm_array_script(s, {1, 3, 6}, "rung d2", ctx);
  for (const auto* line :
       {"#SBATCH --array=1,3,6%2\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=4\n",
        "#SBATCH --gpus-per-node=4\n", "#SBATCH --signal=USR2@90\n", "#SBATCH --account=proj\n",
        "#SBATCH --exclusive\n", "#SBATCH --chdir=\"/work\"\n", "#SBATCH --job-name=xsagpt-ladder-00000001\n",
        "#SBATCH --output=\"/s/runs/slurm/logs/%x-%A_%a.out\"\n",
        "srun --kill-on-bad-exit=1 '/opt/x sagpt' sweep -c /s/ladder.json --point-from-env SLURM_ARRAY_TASK_ID\n",
        "scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"",
        // The point says whether it may requeue (slurm.requeue_limit) before the task does.
        "  if '/opt/x sagpt' sweep -c /s/ladder.json --point-from-env SLURM_ARRAY_TASK_ID --requeue; then\n"})
    EXPECT_THAT(text, HasSubstr(line));
  EXPECT_LT(text.find("--requeue; then"), text.find("scontrol requeue"));
  EXPECT_THAT(text, Not(HasSubstr("B:USR2")));  // a signal to the batch shell alone never reaches srun's tasks
  EXPECT_THAT(text, Not(HasSubstr("--partition")));
  const auto summary = slurm_summary_script(s, ctx);
  EXPECT_THAT(summary, HasSubstr("'/opt/x sagpt' sweep -c /s/ladder.json --summarize\n"));
  EXPECT_THAT(summary, HasSubstr("#SBATCH --job-name=xsagpt-ladder-00000001-summary\n"));
  EXPECT_THAT(summary, Not(HasSubstr("--array")));
}

TEST(SlurmScripts, PathsAreQuotedAsSbatchReadsThemOrRefused) {
  SlurmSettings s;
  s.time = "10";
  s.time_s = 600;
  SlurmScriptContext ctx{"/opt/x", "/s/my \"sweep\".json", "/w ork", "/s/runs 100%/slurm/logs", "xsagpt-runs-1"};
  const auto text = slurm_array_script(s, {0}, "every point", ctx);
  EXPECT_THAT(text, HasSubstr("#SBATCH --chdir=\"/w ork\"\n"));
  // '%' doubled where sbatch reads file name patterns; its own %x, %A and %a kept.
  EXPECT_THAT(text, HasSubstr("#SBATCH --output=\"/s/runs 100%%/slurm/logs/%x-%A_%a.out\"\n"));
  EXPECT_THAT(text, HasSubstr("sweep -c '/s/my \"sweep\".json' --point-from-env"));
  EXPECT_THAT(slurm_summary_script(s, ctx), HasSubstr("#SBATCH --output=\"/s/runs 100%%/slurm/logs/%x-%j.out\"\n"));
  EXPECT_NO_THROW(check_slurm_script_values(ctx, {"every point"}));

  auto refusal = [&](SlurmScriptContext c, std::vector<std::string> labels = {}) {
    return test::error_of<ConfigError>([&] { check_slurm_script_values(c, labels); });
  };
  auto with = [&](std::string SlurmScriptContext::*field, const std::string& v) {
    auto c = ctx;
    c.*field = v;
    return c;
  };
  EXPECT_THAT(refusal(with(&SlurmScriptContext::log_dir, "/s/a\nrm -rf x/slurm/logs")),
              HasSubstr("out_dir's log folder \"/s/a\\nrm -rf x/slurm/logs\" holds a control character"));
  EXPECT_THAT(refusal(with(&SlurmScriptContext::sweep_file, "/s/a\rb.json")), HasSubstr("the sweep file's path"));
  EXPECT_THAT(refusal(with(&SlurmScriptContext::workdir, "/w\\x")), HasSubstr("the working directory \"/w\\\\x\" holds a backslash"));
  EXPECT_THAT(refusal(with(&SlurmScriptContext::binary, "/b\tx")), HasSubstr("the xsagpt binary's path"));
  EXPECT_THAT(refusal(ctx, {"rung a\nb"}), HasSubstr("the array's label"));
}

TEST(SlurmQueue, ReadsSqueuesTasksWithTheReasonEachWaits) {
  const auto tasks = parse_queued_tasks(
      "3|4711_3|PENDING|Priority\n"
      "5|4711_5|PENDING|launch failed requeued held\n"
      "N/A|4712|PENDING|Dependency\n"  // the summary job: no task of an array
      "7|4711_7|RUNNING|None\n"
      "8|4711_8|PENDING|SomeNewReason\n"
      "not a line of squeue's\n");
  ASSERT_EQ(tasks.size(), 4u);
  EXPECT_EQ(tasks.at(3).job, "4711_3");
  EXPECT_EQ(tasks.at(3).describe(), "job 4711_3 PENDING (Priority: waiting for jobs of higher priority)");
  EXPECT_EQ(tasks.at(5).describe(), "job 4711_5 PENDING (launch failed requeued held: its launch failed on a node and "
                                    "Slurm held it: check the node, then `scontrol release`)");
  EXPECT_EQ(tasks.at(7).describe(), "job 4711_7 RUNNING");
  EXPECT_EQ(tasks.at(8).describe(), "job 4711_8 PENDING (SomeNewReason)");  // as squeue gives it
}

TEST(SlurmScripts, JobNamesAreStablePerSweepDirectory) {
  EXPECT_EQ(slurm_job_name("/a/runs/ladder"), slurm_job_name("/a/runs/ladder"));
  EXPECT_NE(slurm_job_name("/a/runs/ladder"), slurm_job_name("/b/runs/ladder"));
  EXPECT_THAT(slurm_job_name("/a/runs/my ladder"), HasSubstr("xsagpt-my_ladder-"));
}
