"""The independent tokenizer reference of the tests: a tiktoken Encoding built from a
local encoder.json/vocab.bpe (no download) with tiktoken's own GPT-2 regex and
<|endoftext|> = 50256, as tiktoken.get_encoding("gpt2") would be; and the environment
under which anything that would download GPT-2's files fails instead."""
import os
import pathlib

EOT_ID = 50256


def gpt2_encoding(vocab_dir: pathlib.Path, name: str = "gpt2-local"):
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import r50k_pat_str
    ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=str(vocab_dir / "vocab.bpe"),
                                            encoder_json_file=str(vocab_dir / "encoder.json"))
    return tiktoken.Encoding(name, pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOT_ID}, explicit_n_vocab=EOT_ID + 1)


def offline_env(tmp_path: pathlib.Path, **extra) -> dict:
    """No XSAGPT_GPT2_VOCAB, an empty tiktoken cache and every HTTP(S) request sent to a closed
    port: anything that would download fails."""
    env = {k: v for k, v in os.environ.items() if k not in ("XSAGPT_GPT2_VOCAB", "NO_PROXY", "no_proxy")}
    cache = tmp_path / "empty-tiktoken-cache"
    cache.mkdir(exist_ok=True)
    env.update(TIKTOKEN_CACHE_DIR=str(cache), HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9",
               http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9", **extra)
    return env
