"""`xsagpt tokenize` against tiktoken, the tokenizer nanoGPT-style data is prepared
with: a tiktoken Encoding is built from the same local encoder.json/vocab.bpe with
tiktoken's own gpt2 regex and special token, and both must agree token for token
on real text (the King James Bible from Debian's bible-kjv) and on synthetic
Unicode; decoding must invert encoding and replace broken UTF-8 as tiktoken does."""
import json
import os
import random
import shutil
import subprocess

import pytest

tiktoken = pytest.importorskip("tiktoken")
from gpt2_tiktoken import gpt2_encoding  # noqa: E402

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def enc(gpt2_vocab_dir):
    return gpt2_encoding(gpt2_vocab_dir)


@pytest.fixture(scope="module")
def tokenize(build_dir, gpt2_vocab_dir, tmp_path_factory):
    """Runs `xsagpt tokenize` on a string or bytes (encode) or a list of ids (decode).
    Output is read as bytes: text mode would turn the \r\n the tests use into \n."""
    folder = tmp_path_factory.mktemp("tokenize")

    def run(value, *flags, check=True):
        path = folder / "input"
        if isinstance(value, list):
            value = json.dumps(value)
        path.write_bytes(value if isinstance(value, bytes) else value.encode())
        proc = subprocess.run([build_dir / "xsagpt", "tokenize", "--vocab", gpt2_vocab_dir, *flags, path],
                              capture_output=True)
        out, err = proc.stdout.decode(), proc.stderr.decode()
        if not check:
            return proc.returncode, out + err
        assert proc.returncode == 0, f"xsagpt tokenize {' '.join(flags)} exited {proc.returncode}:\n{out}\n{err}"
        return out if "--decode" in flags else json.loads(out)
    return run


def assert_same_tokens(ours, ref, enc):
    if ours == ref:
        return
    i = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
    context = enc.decode(ref[max(0, i - 5):i + 5])
    pytest.fail(f"first difference at token {i} of {len(ref)} (ours {len(ours)}): ours {ours[i:i + 5]}, "
                f"tiktoken {ref[i:i + 5]}, near {context!r}")


@pytest.fixture(scope="module")
def bible_text():
    if not shutil.which("bible"):
        pytest.skip("the bible program (Debian package bible-kjv) is not installed")
    # The Law and the Gospels with Acts, about 1.4 MB: verse numbers, chapter headings,
    # wrapped lines, punctuation and numbers in a real English text.
    books = ["Gen1:1-Deu34:12", "Mat1:1-Act28:31"]
    text = "".join(subprocess.run(["bible", "-l80", b], capture_output=True, text=True, encoding="utf-8",
                                  check=True).stdout for b in books)
    assert len(text) > 1_000_000 and "In the beginning God created" in text
    return text


def synthetic_text(seed=0, n=20_000):
    """Fixed fragments for named cases plus random text drawn from character pools
    (all assigned well before Unicode 14, so regex engines' Unicode tables agree)."""
    fragments = [
        "I'm sure you'll see they've said it's what we'd do, and we're done. ",
        "IT'S DON'T 'S 'd 'LL ''s rock'n'roll ", "x 's", "'''",
        "Café crème brûlée, naïve façade, Ångström, Øresund, smørrebrød, Zürich. ",
        "日本語のテキストと中文文本，还有한국어 문장。", "Ελληνικά, русский текст, עברית, العربية, हिन्दी। ",
        "emoji 😀😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ ✨ ", "digits 1234567890 3.14159 1,000,000 ٣٤٥ ⅷ ½ ² ",
        "tabs\tand\t\ttabs", "runs of   spaces   ", "crlf\r\nline\r\n", "\n\n\n", "   \n  \n\t \n",
        "nbsp\u00a0\u00a0x nel\u0085\u0085x ls\u2028ps\u2029 ideographic\u3000space zwsp\u200bx \u2003em ",
        "\x00\x01\x1f\x7f control", "math ∑∫√∞ ≠ ≤ ≥ → ⇒ ∀∃ ", "a\u0301e\u0308 combining ",
        "<|endoftext|>", "<|endoftext", "ending with spaces   ",
    ]
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" * 4,
        "0123456789" * 2, " " * 30, "\n\t\r\u00a0\u0085\u2003\u3000",
        "'.,;:!?\"()[]{}<>-_=+*/\\|@#$%^&~`",
        "éèêëàâäôöûüçñßøåÆŒ", "αβγδεζηθλμπσωΩ", "абвгдежзийклмнопрст",
        "".join(map(chr, range(0x4E00, 0x4E80))), "".join(map(chr, range(0x3041, 0x3097))),
        "".join(map(chr, range(0xAC00, 0xAC80))), "".join(map(chr, range(0x1F600, 0x1F650))),
        "".join(map(chr, range(0x0300, 0x0370))), "".join(map(chr, range(0x0660, 0x066A))),
    ]
    rng = random.Random(seed)
    parts = list(fragments)
    while sum(map(len, parts)) < n:
        pool = rng.choice(pools)
        parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 12))))
        if rng.random() < 0.3:
            parts.append(rng.choice(fragments))
    return "".join(parts)


def test_bible_matches_tiktoken(enc, tokenize, bible_text):
    ours = tokenize(bible_text)
    assert_same_tokens(ours, enc.encode_ordinary(bible_text), enc)
    assert tokenize(ours, "--decode") == bible_text


@pytest.mark.parametrize("seed", [0, 1])
def test_synthetic_unicode_matches_tiktoken(enc, tokenize, seed):
    text = synthetic_text(seed)
    ours = tokenize(text)
    assert_same_tokens(ours, enc.encode_ordinary(text), enc)
    assert tokenize(ours, "--decode") == text


def test_endoftext_only_when_allowed(enc, tokenize):
    text = f"first document.{EOT}second one{EOT}{EOT} third <|endoftext"
    assert_same_tokens(tokenize(text), enc.encode_ordinary(text), enc)
    with_special = tokenize(text, "--allow-special")
    assert_same_tokens(with_special, enc.encode(text, allowed_special="all"), enc)
    assert with_special.count(50256) == 3
    assert tokenize(with_special, "--decode") == text


def test_decode_replaces_broken_utf8_like_tiktoken(enc, tokenize):
    # Random ids, biased to single-byte tokens >= 0x80 that split characters.
    high_bytes = [enc.encode_single_token(bytes([b])) for b in range(0x80, 0x100)]
    rng = random.Random(0)
    ids = [rng.choice(high_bytes) if rng.random() < 0.5 else rng.randrange(50257) for _ in range(3000)]
    ours = tokenize(ids, "--decode")
    assert "\ufffd" in ours
    assert ours == enc.decode(ids, errors="replace")


def test_bad_input_is_reported(tokenize, xsagpt, tmp_path):
    proc = xsagpt("tokenize", "-", check=False, input="text", env={**os.environ, "XSAGPT_GPT2_VOCAB": str(tmp_path)})
    assert proc.returncode == 2
    assert f"XSAGPT_GPT2_VOCAB: {tmp_path} has no encoder.json" in proc.stdout + proc.stderr
    for value, flags, message in [
        ("naïve".encode("latin-1"), [], "not valid UTF-8 at byte 2"),
        ([1, 50257], ["--decode"], "token id 50257 is outside the vocabulary [0, 50257)"),
        ([1, "2"], ["--decode"], "element 1: expected a token id"),
        ("not json", ["--decode"], "expected a JSON array of token ids"),
        ("[" * 100000 + "]" * 100000, ["--decode"], "JSON nested more than 64 levels deep"),  # before: exit 139
    ]:
        returncode, output = tokenize(value, *flags, check=False)
        assert returncode == 2, output
        assert message in output and "input" in output
