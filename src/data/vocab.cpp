// Reading vocab.json and checking a shard set's vocabulary against the model's (vocab.h).
#include "data/vocab.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <unordered_set>


namespace xsagpt {

ShardVocab vocab_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || j.value("format", "") != kVocabFormat)
    throw DataError(fmt::format("{}: not a compact vocabulary (expected \"format\": \"{}\")", where, kVocabFormat));
  ShardVocab v;
  v.file = where;
  const auto k = j.find("vocab_size");
  const auto ids = j.find("gpt2_ids");
  const auto rest = j.find("rest_id");
  if (k == j.end() || !k->is_number_integer() || ids == j.end() || !ids->is_array() || rest == j.end() ||
      !rest->is_number_integer() || k->get<int64_t>() < 2 || rest->get<int64_t>() != k->get<int64_t>() - 1 ||
      static_cast<int64_t>(ids->size()) != k->get<int64_t>() - 1)
    throw DataError(fmt::format("{}: expected vocab_size K >= 2, rest_id K-1 and K-1 gpt2_ids", where));
  v.size = k->get<int64_t>();
  std::unordered_set<int64_t> seen;
  for (const auto& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kGpt2Tokens ||
        !seen.insert(id.get<int64_t>()).second)
      throw DataError(fmt::format("{}: gpt2_ids must be distinct GPT-2 token ids (0 to {}), got {}", where,
                                  kGpt2Tokens - 1, id.dump()));
    v.gpt2_ids.push_back(id.get<int64_t>());
  }
  if (j.contains("rest_marker") && j["rest_marker"].is_string()) v.rest_marker = j["rest_marker"].get<std::string>();
  return v;
}

nlohmann::json vocab_to_json(const ShardVocab& v) {
  if (!v.compact()) return nullptr;
  return {{"format", kVocabFormat},
          {"vocab_size", v.size},
          {"rest_id", v.size - 1},
          {"rest_marker", v.rest_marker},
          {"gpt2_ids", v.gpt2_ids}};
}

ShardVocab read_vocab_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DataError(fmt::format("{}: cannot read", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: not JSON ({})", path, e.what()));
  }
  return vocab_from_json(j, path);
}

std::string vocab_file_beside(const std::string& shard_path) {
  return (std::filesystem::path(shard_path).parent_path() / kVocabFile).string();
}

ShardVocab shard_set_vocab(const std::vector<const ShardInfo*>& shards) {
  std::map<std::string, ShardVocab> read;  // vocab.json path -> its contents, each file read once
  ShardVocab first;
  const ShardInfo* first_shard = nullptr;
  for (const ShardInfo* s : shards) {
    ShardVocab v;
    const int64_t k = s->compact_vocab;
    if (k > 0) {
      const std::string file = vocab_file_beside(s->path);
      if (!std::filesystem::is_regular_file(file))
        throw DataError(fmt::format("{}: its header says a compact vocabulary of {} ids, but there is no {} beside it "
                                    "(data/prepare.py compact writes one)",
                                    s->path, k, file));
      auto it = read.find(file);
      if (it == read.end()) it = read.emplace(file, read_vocab_file(file)).first;
      v = it->second;
      if (v.size != k)
        throw DataError(fmt::format("{}: its header says a compact vocabulary of {} ids, {} says {}", s->path,
                                    k, file, v.size));
    }
    if (!first_shard) {
      first = v, first_shard = s;
      continue;
    }
    if (v.size != first.size || v.gpt2_ids != first.gpt2_ids)
      throw DataError(fmt::format("{} holds {}, but {} holds {}: train and val shards must share one vocabulary",
                                  s->path, describe(v), first_shard->path, describe(first)));
  }
  return first;
}

void check_model_vocab(const ShardVocab& v, int64_t vocab_size, const std::string& where) {
  if (!v.compact()) return;
  const int64_t padded = (v.size + 63) / 64 * 64;
  if (vocab_size < v.size || vocab_size > padded)
    throw DataError(fmt::format("{}: a compact vocabulary of {} ids ({}), but model.vocab_size is {} "
                                "(expected {}{}: set model.vocab_size={})",
                                where, v.size, v.file, vocab_size, v.size,
                                padded > v.size ? fmt::format(" to {}", padded) : "", v.size));
}

std::string describe(const ShardVocab& v) {
  return v.compact() ? fmt::format("a compact vocabulary of {} ids ({})", v.size, v.file)
                     : std::string("GPT-2 token ids");
}

ShardVocab recorded_vocab(const nlohmann::json& j, const std::string& where) {
  return j.is_null() ? ShardVocab{} : vocab_from_json(j, where);
}

void check_model_input(const ShardVocab& model, int64_t vocab_size, const std::string& model_where,
                       const ShardVocab& input, const std::string& input_where, int64_t input_ids) {
  // Ids of one vocabulary mean nothing in another's, though every one may be in range.
  if (model.size != input.size || model.gpt2_ids != input.gpt2_ids)
    throw DataError(fmt::format("{} holds {}, but {} was trained on {}: its ids mean other tokens there", input_where,
                                describe(input), model_where, describe(model)));
  check_model_vocab(input, vocab_size, input_where);
  if (input_ids > vocab_size)
    throw DataError(fmt::format("{}: model.vocab_size {} is smaller than the {} ids of {} ({}), so the model was not "
                                "trained on them",
                                model_where, vocab_size, input_ids, describe(input), input_where));
}

ShardVocab check_shards_for_model(const std::vector<const ShardInfo*>& shards, const ShardVocab* model,
                                  int64_t vocab_size, const std::string& model_where) {
  if (shards.empty()) return model ? *model : ShardVocab{};
  const auto data = shard_set_vocab(shards);
  check_model_input(model ? *model : data, vocab_size, model_where, data, shards.front()->path);
  // Shards are read from disk (or the page cache) in parallel; the first error in file
  // order is the one reported.
  const size_t workers = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<std::string> errors(shards.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t w = 0; w < std::min(workers, shards.size()); ++w)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < shards.size();) {
        try {
          check_token_ids(*shards[i], vocab_size);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
    });
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (!e.empty()) throw DataError(e);
  return data;
}

}  // namespace xsagpt
