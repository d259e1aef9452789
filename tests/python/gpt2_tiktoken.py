"""The independent tokenizer reference of the tests: a tiktoken Encoding built from a
local encoder.json/vocab.bpe (no download) with tiktoken's own GPT-2 regex and
<|endoftext|> = 50256, as tiktoken.get_encoding("gpt2") would be."""
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
