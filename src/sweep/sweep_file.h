// The sweep file's sections, each key declared once (sweep/file_keys.h): the top level,
// the ladder, a rung given as an object, the ladder's token and rate rules (and the
// rate's anchor), its estimate, and the Slurm settings of the sweep and of a rung. The
// readers (sweep/grid.cpp, sweep_spec.cpp, ladder.cpp, ladder_rules.cpp, slurm_spec.cpp)
// read a section with file_keys::read and then check what its values must be; the key
// tables of docs/sweeps-and-plots.md and docs/cluster.md are printed from these lists
// (`xsagpt config --sweep SECTION`, scripts/maint/sync_config_reference.py), and
// tests/python/layout/test_docs.py holds the pages to them.
//
// Adding a key: a member, whose initialiser is its default, and its line in fields()
// (name, member, help; a `json` member states its shape, a key with no default is
// required); then the code that uses it, and the script rewrites the docs' table.
#pragma once

#include "config/schema.h"
#include "sweep/file_keys.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

// The top level.
struct SweepFileSection {
  std::string base;
  std::vector<std::string> set;
  json variants;
  std::string baseline;
  json grid;
  bool constant_batch_tokens = false;
  json ladder;
  json slurm;
  std::string out_dir;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("base", s.base, "the run config every point starts from: a path, relative to the sweep file or as given",
      {.required = true});
    v("set", s.set, "overrides every point gets, as --set takes them ([\"train.device=cpu\"])",
      {.shape = "a list of \"section.key=value\" strings"});
    v("variants", s.variants,
      "named variants, each the overrides that make it ({\"sa\": {}, \"xsa\": {\"model.attention\": \"xsa\"}}): "
      "every variant runs at every setting of the grid and is compared with the baseline",
      {.shape = "an object"});
    v("baseline", s.baseline, "the variant every other one is compared with (required with variants)");
    v("grid", s.grid,
      "the other axes, each key with its values ({\"train.seed\": [1, 2, 3]}); a point is every combination. "
      "Optional with variants",
      {.shape = "an object"});
    v("constant_batch_tokens", s.constant_batch_tokens,
      "when a point changes train.seq_len, keep the base's tokens per micro-batch and per step through its "
      "micro_batch and batch_tokens (the paper's sequence-length study); not with a ladder");
    v("ladder", s.ladder,
      "the variants at several model sizes, each with a token budget and a rate by stated rules (the ladder's "
      "keys); needs variants",
      {.shape = "an object"});
    v("slurm", s.slurm, "how each point runs as a Slurm job, `xsagpt sweep --slurm` (docs/cluster.md)",
      {.shape = "an object"});
    v("out_dir", s.out_dir,
      "the sweep directory: each point runs in a directory of its own in it, named after the point",
      {.required = true});
  }
};

// "ladder".
struct LadderSection {
  json rungs;
  std::optional<int64_t> aspect, head_dim;
  json tokens, lr;
  json lr_multipliers;
  std::optional<int64_t> tune_rungs;
  bool tune_past_edge = false;
  json estimate;
  std::optional<std::vector<std::string>> extrapolate_to;
  double extrapolate_decades = 1;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("rungs", s.rungs,
      "the sizes, smallest first, at least 2, each larger in parameters than the one before: a depth (an integer, "
      "model.n_layer, its width by aspect and head_dim, as nanochat's --depth), a model preset's name "
      "(\"gpt2-124m\", \"paper-0.7b\": any file of configs/model/), or either as an object with settings of that "
      "rung alone (ladder.rungs[i])",
      {.shape = "a list of sizes", .required = true});
    v("aspect", s.aspect, "the width rule of depth rungs: d_model = n_layer x aspect (required with them)");
    v("head_dim", s.head_dim,
      "the width rule of depth rungs: n_head = d_model / head_dim (required with them; a depth that gives no "
      "whole head count is refused)");
    v("tokens", s.tokens, "each rung's token budget (ladder.tokens)", {.shape = "an object", .required = true});
    v("lr", s.lr, "each rung's peak rate (ladder.lr)", {.shape = "an object", .required = true});
    v("lr_multipliers", s.lr_multipliers,
      "every rung also at these multiples of its rate, e.g. [0.5, 1, 2] (an axis lr_mult); each variant is then "
      "judged at its own best rate per rung",
      {.shape = "a list of distinct positive numbers"});
    v("tune_rungs", s.tune_rungs,
      "with lr_multipliers: run them at the smallest this many rungs only (>= 1, fewer than the rungs); each "
      "variant's best multiplier there (lowest mean final val loss over those rungs and the seeds) is carried to "
      "every larger rung, by μP where its points use model.parametrization mup, else by the rate rule (with a "
      "warning: a width rule is not shown to transfer); with several data ratios every ratio runs there and the "
      "longest decides, as its branches share its rate; absent: every rung tunes");
    v("tune_past_edge", s.tune_past_edge,
      "with tune_rungs: a variant whose best multiplier is the smallest or largest of lr_multipliers also runs "
      "its tuning rungs at one more beyond that edge (the list's end ratio again, [0.5, 1, 2] gives 0.25 or 4), "
      "so that a tuned rate has a worse one on each side");
    v("estimate", s.estimate,
      "what the dry run's time estimate rests on (ladder.estimate); absent: steps measured here",
      {.shape = "an object"});
    v("extrapolate_to", s.extrapolate_to,
      "run configs whose training compute the fit is carried to (absent: the paper's "
      "configs/runs/paper-{0.7b,1.4b,2.7b}.json, 200,000 steps of 524,288 tokens)");
    v("extrapolate_decades", s.extrapolate_decades,
      "how many decades of compute past the rungs a multiplier is carried, >= 0: a target further out gets null "
      "and why; more than 1 is a projection, flagged x? wherever it is printed");
  }
};

// A rung given as an object ({"depth": 4, "set": {...}}) rather than a depth or a name.
struct RungSection {
  std::optional<int64_t> depth;
  std::optional<std::string> preset;
  json set;
  json slurm;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("depth", s.depth, "a depth rung (one of depth or preset)");
    v("preset", s.preset, "a model preset's name (one of depth or preset)");
    v("set", s.set,
      "overrides of this rung alone ({\"train.activation_checkpointing\": \"block\"}): what trains the same model "
      "the same way (micro-batch, checkpointing, data paths), never what the ladder, a variant or the grid sets, "
      "nor model.attention or an attention kind's key",
      {.shape = "an object"});
    v("slurm", s.slurm,
      "this rung's Slurm settings over the sweep's slurm section: any of its keys but cluster_nodes "
      "({\"nodes\": 2})",
      {.shape = "an object"});
  }
};

// ladder.tokens.params: the parameters a per-parameter budget counts.
enum class TokenParams { kTotal, kNonEmbedding };
inline constexpr std::array<std::pair<TokenParams, const char*>, 2> kTokenParamsNames{
    {{TokenParams::kTotal, "total"}, {TokenParams::kNonEmbedding, "non_embedding"}}};
inline const auto& enum_names(TokenParams) { return kTokenParamsNames; }

// "ladder.tokens": one of per_param or flops.
struct TokensSection {
  json per_param;
  TokenParams params = TokenParams::kTotal;
  json flops;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("per_param", s.per_param,
      "tokens = per_param x parameters (Chinchilla: 20 of all parameters); one of per_param or flops. Several "
      "ratios ([5, 10, 20]) are several budgets per rung (an axis ratio), with train.schedule \"wsd\": one run "
      "per rung at the largest, each smaller one a branch of it that decays from its checkpoint",
      {.shape = "a positive number, or a list of distinct ones"});
    v("params", s.params, "the parameters per_param counts: all of them, or the blocks' alone");
    v("flops", s.flops,
      "a FLOP budget, one for every rung or one per rung: tokens = flops / flops_per_token (src/model/counts.h)",
      {.shape = "a number or a list of one number per rung"});
  }
};

// "ladder.lr": a table, or a power law in width from an anchor.
struct LrSection {
  json per_rung;
  std::optional<double> width_exponent;
  json anchor;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("per_rung", s.per_rung, "a table: each rung's rate", {.shape = "a list of one rate per rung"});
    v("width_exponent", s.width_exponent,
      "k of a power law in width, lr = lr0 (d_model / d0)^k, from the anchor (with it; not with per_rung)");
    v("anchor", s.anchor, "the rate at one width that the power law scales from (ladder.lr.anchor)",
      {.shape = "an object"});
  }
};

struct AnchorSection {
  double d_model = 0;
  double lr = 0;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("d_model", s.d_model, "the anchor's width d0", {.required = true});
    v("lr", s.lr, "its rate lr0", {.required = true});
  }
};

// "ladder.estimate": a named GPU at an assumed MFU, or a bench file's measured rate.
struct EstimateSection {
  std::optional<std::string> device;
  std::optional<double> mfu;
  std::optional<std::string> bench;
  std::optional<std::string> bench_variant;
  std::optional<double> overhead_s;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("device", s.device,
      "a GPU whose dense peak src/train/mfu.cpp knows (H100, H200, A100, B200, L40S, ...), at an assumed mfu; not "
      "with bench");
    v("mfu", s.mfu,
      "the share of the device's peak a step achieves, in (0, 1] (required with device; one H100 measured "
      "0.38-0.40 at 124M and 0.48-0.49 at 0.7B with the default kernels)");
    v("bench", s.bench,
      "a file `xsagpt bench --json` wrote (as given, or beside the sweep file): its training step's tokens/s times "
      "that model's flops_per_token, the FLOP rate applied to every rung");
    v("bench_variant", s.bench_variant, "the bench file's variant to read (with bench; absent: its first)");
    v("overhead_s", s.overhead_s,
      "seconds each point spends besides training (start, checkpoints, the summary), >= 0 (absent: 10 with a GPU, "
      "3 on a CPU)");
  }
};

// One point's Slurm job: the "slurm" section, and a rung's own over it.
struct SlurmSettings {
  std::string time, partition, account, qos;
  int64_t nodes = 1, ntasks_per_node = 1, gpus_per_node = 0, cpus_per_task = 1;
  int64_t array_limit = 0;  // 0: no throttle
  int64_t signal_s = 120;
  int64_t requeue_limit = 3;
  std::vector<std::string> extra;
  int64_t time_s = 0;  // `time` in seconds
  int64_t ranks() const { return nodes * ntasks_per_node; }
  bool operator==(const SlurmSettings&) const = default;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("time", s.time, "a job's time limit (\"2-00:00:00\", \"90\" minutes)",
      {.shape = "a time limit as sbatch --time reads it", .required = true});
    v("partition", s.partition, "passed to sbatch when given");
    v("account", s.account, "passed to sbatch when given");
    v("qos", s.qos, "passed to sbatch when given");
    v("nodes", s.nodes, "nodes of one point's job");
    v("ntasks_per_node", s.ntasks_per_node,
      "ranks per node (one per GPU): a point trains on nodes x ntasks_per_node ranks");
    v("gpus_per_node", s.gpus_per_node, "GPUs asked per node");
    v("cpus_per_task", s.cpus_per_task, "CPUs per rank");
    v("array_limit", s.array_limit, "at most this many tasks of one array at once (sbatch's %K); 0: no limit");
    v("signal_s", s.signal_s,
      "USR2 this many seconds before the time limit (at most 65535, sbatch's limit): the point checkpoints and its "
      "task requeues itself");
    v("requeue_limit", s.requeue_limit,
      "how many times in a row a point may requeue itself without a newer checkpoint (0 to 1000); past it the point "
      "stops and is failed as needing attention");
    v("extra", s.extra,
      "more #SBATCH lines, as written ([\"--constraint=h100\", \"--exclusive\"]); none may set an option the "
      "scripts set themselves");
  }
};

// "slurm": the settings of every point's job, and the cluster the dry run packs them on.
struct SlurmSection {
  SlurmSettings job;
  std::optional<int64_t> cluster_nodes;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    SlurmSettings::fields(s.job, v);
    v("cluster_nodes", s.cluster_nodes,
      "the nodes the dry run packs the arrays on (absent: the most nodes one job asks for); the sweep's alone, "
      "not a rung's");
  }
};

// The sections' names, as `xsagpt config --sweep` takes them, each with the prefix its
// keys carry in the docs ("ladder.tokens.").
struct SweepFileSectionName {
  const char* name;
  const char* prefix;
};
const std::vector<SweepFileSectionName>& sweep_file_sections();

// A section's key table in Markdown (its header and a row per key); ConfigError
// naming the sections for another name.
std::string sweep_file_reference(const std::string& section);

}  // namespace xsagpt
