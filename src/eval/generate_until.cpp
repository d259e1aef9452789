#include "eval/generate_until.h"

#include "sample/generate.h"
#include "tokenizer/utf8.h"

namespace xsagpt::eval {

namespace {

// Byte offset of the earliest occurrence of any stop string, or npos.
size_t first_stop(const std::string& text, const std::vector<std::string>& until) {
  size_t at = std::string::npos;
  for (const auto& u : until)
    if (!u.empty()) at = std::min(at, text.find(u));
  return at;
}

}  // namespace

Generation generate_until(GPT& model, const Gpt2Tokenizer& tok, const GenerateRequest& req) {
  auto ids = tok.encode(req.prompt, SpecialTokens::kAllowed);
  std::vector<int64_t> prompt(ids.begin(), ids.end());
  if (prompt.empty()) prompt.push_back(tok.eot_id());
  const int64_t block = model->cfg.block_size;
  const int64_t max_new = req.max_new_tokens > 0 ? req.max_new_tokens : std::min<int64_t>(256, block);
  const int64_t room = std::max<int64_t>(1, block - max_new);
  if (static_cast<int64_t>(prompt.size()) > room) prompt.erase(prompt.begin(), prompt.end() - room);

  SampleOptions so;
  so.max_new_tokens = max_new;
  so.temperature = req.temperature;
  so.top_k = 0;
  so.seed = req.seed;
  so.vocab_limit = tok.vocab_size();
  utf8::StreamDecoder decoder;
  std::string text;
  Generation g;
  generate(
      model, prompt, so,
      [&](int64_t id) {
        text += decoder.push(tok.token_bytes(static_cast<int32_t>(id)));
        ++g.n_tokens;
      },
      [&] { return first_stop(text, req.until) != std::string::npos; });
  text += decoder.finish();
  if (const size_t at = first_stop(text, req.until); at != std::string::npos) text.resize(at);
  g.text = std::move(text);
  return g;
}

}  // namespace xsagpt::eval
