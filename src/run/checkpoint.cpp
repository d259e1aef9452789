#include "run/checkpoint.h"

#include "run/run_paths.h"
#include "util/ivalue_json.h"
#include "util/torch_save.h"
#include "util/zip_check.h"

#include <fmt/format.h>

#include <algorithm>

namespace xsagpt {

namespace fs = std::filesystem;
using c10::IValue;
using GenericDict = c10::impl::GenericDict;

namespace {

GenericDict tensor_dict(const std::map<std::string, torch::Tensor>& m) {
  GenericDict d(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [k, t] : m) d.insert(k, t.detach());
  return d;
}

std::map<std::string, torch::Tensor> tensor_map(const IValue& v, const std::string& what) {
  if (!v.isGenericDict()) throw CheckpointError(what + ": expected a dict of tensors");
  std::map<std::string, torch::Tensor> m;
  for (const auto& kv : v.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor())
      throw CheckpointError(what + ": expected name -> tensor entries");
    m[kv.key().toStringRef()] = kv.value().toTensor();
  }
  return m;
}

}  // namespace

void save_checkpoint(const Checkpoint& c, const fs::path& path) {
  GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("format", std::string("xsagpt-checkpoint"));
  d.insert("version", int64_t{1});
  d.insert("step", c.step);
  d.insert("tokens", c.tokens);
  d.insert("elapsed_s", c.progress.elapsed_s);
  d.insert("config", json_to_ivalue(c.config));
  if (!c.kernels.empty()) d.insert("kernels", c.kernels);
  if (!c.vocab.is_null()) d.insert("vocab", json_to_ivalue(c.vocab));
  d.insert("model", tensor_dict(c.model));
  GenericDict opt(c10::StringType::get(), c10::AnyType::get());
  opt.insert("name", std::string(schema::enum_name(c.optimizer.name)));
  opt.insert("exp_avg", tensor_dict(c.optimizer.adamw.exp_avg));
  opt.insert("exp_avg_sq", tensor_dict(c.optimizer.adamw.exp_avg_sq));
  opt.insert("step", tensor_dict(c.optimizer.adamw.step));
  opt.insert("momentum_buffer", tensor_dict(c.optimizer.muon_momentum));
  d.insert("optimizer", opt);
  d.insert("loader", json_to_ivalue(c.data.loader));
  d.insert("val_shards", json_to_ivalue(c.data.val_shards));
  d.insert("val_sequences", c.data.val_sequences);
  GenericDict rng(c10::StringType::get(), c10::TensorType::get());
  if (c.rng.cpu.defined()) rng.insert("cpu", c.rng.cpu);
  if (c.rng.cuda.defined()) rng.insert("cuda", c.rng.cuda);
  d.insert("rng", rng);
  d.insert("train_loss", c.progress.train_loss);
  d.insert("val_loss", c.progress.val_loss);
  d.insert("run_id", c.progress.run_id);
  d.insert("rank_changes", json_to_ivalue(c.progress.rank_changes));
  GenericDict window(c10::StringType::get(), c10::AnyType::get());
  window.insert("loss_sum", c.progress.window.loss_sum);
  window.insert("steps", c.progress.window.steps);
  d.insert("train_window", window);

  try {
    torch_save(c10::IValue(d), path);
  } catch (const SaveError& e) {
    throw CheckpointError(std::string(e.what()) + " (earlier checkpoints are untouched)");
  }
}

Checkpoint load_checkpoint(const fs::path& path) {
  const std::string name = path.string();
  if (fs::is_directory(path))
    throw CheckpointError(name + ": is a directory, expected a checkpoint file (a run's checkpoints/step_XXXXXXXX.pt)");
  if (!fs::is_regular_file(path)) throw CheckpointError(name + ": no such checkpoint file");
  std::error_code size_error;  // a file gone since is named by the read below
  if (fs::file_size(path, size_error) == 0 && !size_error)
    throw CheckpointError(name + ": not a readable checkpoint (an empty file, 0 bytes)");
  IValue root;
  try {
    verify_archive(path);  // every checkpoint is a zip archive: any other file fails the rule
    root = torch_load(path);
  } catch (const c10::Error& e) {
    if (is_torch_archive(path))
      throw CheckpointError(name +
                            ": not an xsagpt checkpoint: a PyTorch archive holding Python objects that only "
                            "Python's torch.load rebuilds, such as torch.save(model.state_dict()) writes; "
                            "expected a checkpoint written by xsagpt train (checkpoints/step_XXXXXXXX.pt)");
    throw CheckpointError(
        name + ": not a readable checkpoint (truncated or not a PyTorch archive): " + e.what_without_backtrace());
  }
  if (!root.isGenericDict()) throw CheckpointError(name + ": not an xsagpt checkpoint (top level is not a dict)");
  auto d = root.toGenericDict();
  auto need = [&](const char* key) {
    if (!d.contains(key)) throw CheckpointError(fmt::format("{}: not an xsagpt checkpoint (no '{}' entry)", name, key));
    return d.at(key);
  };
  if (need("format") != IValue(std::string("xsagpt-checkpoint")))
    throw CheckpointError(name + ": not an xsagpt checkpoint (format entry differs)");
  if (need("version").toInt() != 1)
    throw CheckpointError(
        fmt::format("{}: checkpoint version {} is not supported (expected 1)", name, need("version").toInt()));
  Checkpoint c;
  try {
    c.step = need("step").toInt();
    c.tokens = need("tokens").toInt();
    c.progress.elapsed_s = need("elapsed_s").toDouble();
    c.config = ivalue_to_json(need("config"));
    c.model = tensor_map(need("model"), name + ": model");
    auto opt = need("optimizer").toGenericDict();
    if (opt.contains("name"))
      c.optimizer.name = schema::enum_from_name<Optimizer>(opt.at("name").toStringRef(), name + ": optimizer.name");
    c.optimizer.adamw.exp_avg = tensor_map(opt.at("exp_avg"), name + ": optimizer.exp_avg");
    c.optimizer.adamw.exp_avg_sq = tensor_map(opt.at("exp_avg_sq"), name + ": optimizer.exp_avg_sq");
    c.optimizer.adamw.step = tensor_map(opt.at("step"), name + ": optimizer.step");
    if (opt.contains("momentum_buffer"))
      c.optimizer.muon_momentum = tensor_map(opt.at("momentum_buffer"), name + ": optimizer.momentum_buffer");
    c.data.loader = ivalue_to_json(need("loader"));
    if (d.contains("val_shards")) c.data.val_shards = ivalue_to_json(d.at("val_shards"));
    if (d.contains("val_sequences")) c.data.val_sequences = d.at("val_sequences").toInt();
    auto rng = need("rng").toGenericDict();
    if (rng.contains("cpu")) c.rng.cpu = rng.at("cpu").toTensor();
    if (rng.contains("cuda")) c.rng.cuda = rng.at("cuda").toTensor();
    auto& p = c.progress;
    if (d.contains("train_loss")) p.train_loss = d.at("train_loss").toDouble();
    if (d.contains("val_loss")) p.val_loss = d.at("val_loss").toDouble();
    if (d.contains("run_id")) p.run_id = d.at("run_id").toStringRef();
    if (d.contains("rank_changes")) {
      try {
        p.rank_changes = ivalue_to_json(d.at("rank_changes")).get<std::vector<RankChange>>();
      } catch (const nlohmann::json::exception&) {
        throw CheckpointError(name + ": rank_changes: expected a list of {step, from, to} integers");
      }
    }
    if (d.contains("kernels")) c.kernels = d.at("kernels").toStringRef();
    if (d.contains("vocab")) c.vocab = ivalue_to_json(d.at("vocab"));
    if (d.contains("train_window")) {
      auto w = d.at("train_window").toGenericDict();
      p.window = {w.at("loss_sum").toDouble(), w.at("steps").toInt()};
      if (p.window.steps < 0 || !std::isfinite(p.window.loss_sum))
        throw CheckpointError(
            fmt::format("{}: train_window: expected a finite loss sum over >= 0 steps, got {} "
                        "over {}",
                        name, p.window.loss_sum, p.window.steps));
    }
  } catch (const c10::Error& e) {
    throw CheckpointError(name + ": malformed checkpoint: " + e.what_without_backtrace());
  }
  for (const auto& [what, tensors] :
       {std::pair{"model", &c.model}, std::pair{"optimizer.exp_avg", &c.optimizer.adamw.exp_avg},
        std::pair{"optimizer.exp_avg_sq", &c.optimizer.adamw.exp_avg_sq},
        std::pair{"optimizer.momentum_buffer", &c.optimizer.muon_momentum}})
    if (const auto bad = first_non_finite(*tensors, what))
      throw CheckpointError(
          fmt::format("{}: {} holds NaN or infinite values: the run had diverged when it was saved; "
                      "use an earlier checkpoint",
                      name, *bad));
  return c;
}

std::optional<std::string> first_non_finite(const std::map<std::string, torch::Tensor>& tensors,
                                            const std::string& what) {
  for (const auto& [k, t] : tensors)
    if (t.defined() && t.is_floating_point() && !torch::isfinite(t).all().item<bool>()) return what + "." + k;
  return std::nullopt;
}

void verify_archive(const fs::path& path) {
  std::optional<std::string> mismatch;
  try {
    mismatch = zip_damage(path);
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("{}: not a readable checkpoint: {}", path.string(), e.what()));
  }
  if (mismatch)
    throw CheckpointError(
        fmt::format("{}: corrupt checkpoint, its bytes changed since it was written: {}. Use "
                    "an earlier checkpoint",
                    path.string(), *mismatch));
}

fs::path checkpoint_path(const fs::path& run_dir, int64_t step) {
  return RunPaths(run_dir).checkpoints / fmt::format("step_{:08d}.pt", step);
}

int64_t checkpoint_step(const fs::path& file) {
  const auto n = file.filename().string();
  if (!n.starts_with("step_") || !n.ends_with(".pt") || n.size() <= 8) return -1;
  const auto digits = n.substr(5, n.size() - 8);
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

std::vector<fs::path> list_checkpoints(const fs::path& run_dir) {
  std::vector<fs::path> out;
  const auto dir = RunPaths(run_dir).checkpoints;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (checkpoint_step(e.path()) >= 0) out.push_back(e.path());
  // By number: names are zero-padded to 8 digits, so past step 99999999 they no longer sort as text.
  std::sort(out.begin(), out.end(),
            [](const fs::path& a, const fs::path& b) { return checkpoint_step(a) < checkpoint_step(b); });
  return out;
}

std::string last_good_checkpoint(const fs::path& run_dir) {
  const auto all = list_checkpoints(run_dir);
  if (all.empty())
    return fmt::format("No checkpoint was saved in {}: the run has nothing to resume from.", run_dir.string());
  return fmt::format("The last good checkpoint, {}, is kept.", all.back().string());
}

void prune_checkpoints(const fs::path& run_dir, int64_t keep, const std::vector<int64_t>& pinned) {
  auto all = list_checkpoints(run_dir);
  std::erase_if(all, [&](const fs::path& f) {
    return std::find(pinned.begin(), pinned.end(), checkpoint_step(f)) != pinned.end();
  });
  for (size_t i = 0; i + keep < all.size(); ++i) fs::remove(all[i]);
}

}  // namespace xsagpt
