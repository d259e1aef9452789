// Which token ids a shard set holds: GPT-2's, or a compact vocabulary.
//
// data/prepare.py's `compact` command (data/compact.py) rewrites GPT-2 shards at a
// compact vocabulary of K ids: the K-1 most frequent training tokens, and one id
// (K-1) shared by every other token. Such a shard records K in its llm.c header's
// fourth int32 (ShardInfo::compact_vocab; llm.c writes 0 there, which reads as GPT-2 ids)
// and the mapping lies beside it in vocab.json. A model trained on one
// vocabulary's ids means nothing on another's, though every id may be in range, so
// every reader checks here, by name and before anything is written, that:
//  * every compact shard has a vocab.json beside it that agrees with its header;
//  * the train and val shards share one vocabulary (GPT-2's, or the same mapping);
//  * what a model reads is in the vocabulary it was trained on (a checkpoint records
//    it): GPT-2 ids for a GPT-2 model, the very mapping for a compact one;
//  * the model's vocab_size fits a compact vocabulary: from K up to K rounded up to
//    a multiple of 64, the padding GPT-2's 50257 gets in 50304 (a GPT-2-sized model
//    on compact ids, or one too small for them, is refused naming both sizes), and
//    holds every id the input may hold: each shard's token ids (check_token_ids), or
//    the tokenizer's whole range for text.
// One function, check_model_input, is this check for every reader: train (its shards,
// and on a resume the checkpoint's vocabulary against them), analyze (the val shards),
// sample and score (text through the tokenizer); check_shards_for_model is it for a
// shard set.
#pragma once

#include "data/shard.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace xsagpt {

inline constexpr const char* kVocabFile = "vocab.json";
inline constexpr const char* kVocabFormat = "xsagpt compact vocabulary v1";
inline constexpr int64_t kGpt2Tokens = 50257;

struct ShardVocab {
  int64_t size = 0;               // K; 0: GPT-2 ids
  std::vector<int64_t> gpt2_ids;  // compact id -> GPT-2 token id, K-1 of them; id K-1 is the rest
  std::string rest_marker = "<unk>";
  std::string file;               // the vocab.json it was read from ("" for GPT-2)
  bool compact() const { return size > 0; }
};

// Reads and checks one vocab.json (format, K, rest id K-1, K-1 distinct GPT-2 ids);
// DataError naming the file otherwise.
ShardVocab read_vocab_file(const std::string& path);

// What a checkpoint records of the vocabulary its model was trained on: null for
// GPT-2 ids, else vocab.json's format, vocab_size, rest_id, rest_marker and gpt2_ids.
// vocab_from_json checks it as read_vocab_file does, naming `where`.
nlohmann::json vocab_to_json(const ShardVocab& v);
ShardVocab vocab_from_json(const nlohmann::json& j, const std::string& where);

// Where a shard's vocab.json is: the same folder (it may not exist).
std::string vocab_file_beside(const std::string& shard_path);

// The one vocabulary of a shard set (train and val together), checked as above.
ShardVocab shard_set_vocab(const std::vector<const ShardInfo*>& shards);

// Throws DataError when vocab_size does not fit `v` (see above), naming `where` (the
// first shard) and both sizes. A no-op for GPT-2 ids.
void check_model_vocab(const ShardVocab& v, int64_t vocab_size, const std::string& where);

// "GPT-2 token ids", or "a compact vocabulary of K ids (its file)".
std::string describe(const ShardVocab& v);

// A checkpoint's record of its vocabulary ("vocab": null for GPT-2 ids), checked as
// vocab_from_json does, naming `where`.
ShardVocab recorded_vocab(const nlohmann::json& j, const std::string& where);

// The one check of a model against its input (see above): `model` is the vocabulary it
// was trained on, named `model_where` (a checkpoint), with `vocab_size` rows; `input`
// the vocabulary of what it is given, named `input_where`, and `input_ids` how many ids
// that may hold when known in advance (a tokenizer's range; 0 for shards, whose ids are
// checked one by one). DataError naming both when they are not one vocabulary, when
// vocab_size does not fit a compact one, or is smaller than input_ids.
void check_model_input(const ShardVocab& model, int64_t vocab_size, const std::string& model_where,
                       const ShardVocab& input, const std::string& input_where, int64_t input_ids = 0);

// check_model_input for a shard set: their vocabulary (shard_set_vocab) against
// `model`'s (nullptr: a fresh model, which takes the shards'), then every token id below
// vocab_size (check_token_ids on every shard, in parallel; the first error in file order).
// Returns the shards' vocabulary. Every reader of shards with a model calls it.
ShardVocab check_shards_for_model(const std::vector<const ShardInfo*>& shards, const ShardVocab* model,
                                  int64_t vocab_size, const std::string& model_where);

}  // namespace xsagpt
