"""The Python WordPiece tokenizer gives the tokenizers library's ids for every ASCII
text, and declines every text it cannot vouch for, so the vectors never depend on
which of the two tokenized a text."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from helix.memory.bert import MAX_TOKENS, BertEncoder
from helix.memory.modelfiles import PACKAGED_MODEL_DIR
from helix.memory.wordpiece import HashedVocabulary, WordPiece

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"


@pytest.fixture(scope="module")
def library() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(PACKAGED_MODEL_DIR / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    return tokenizer


@pytest.fixture(scope="module")
def vocabulary() -> list[str]:
    vocab = json.loads((PACKAGED_MODEL_DIR / "tokenizer.json").read_text())["model"]["vocab"]
    return sorted(vocab, key=vocab.__getitem__)


@pytest.fixture(scope="module")
def hashed(vocabulary) -> HashedVocabulary:
    return HashedVocabulary(*(memoryview(a) for a in HashedVocabulary.build(vocabulary)))


@pytest.fixture(scope="module")
def wordpiece(hashed) -> WordPiece:
    return WordPiece(hashed, MAX_TOKENS)


def test_the_hashed_vocabulary_is_the_vocabulary(vocabulary, hashed):
    """Every token at its id, and nothing else found: near misses, prefixes,
    extensions, other cases, the empty string, non-ASCII neighbours."""
    ids = {token: n for n, token in enumerate(vocabulary)}
    assert all(hashed.get(token) == n for token, n in ids.items())
    rng = random.Random(5)
    probes = ["", "##", "[unk]", "THE", "the ", " the", "thee", "caf\u00e9", "\u00e9t\u00e9x"]
    for token in rng.sample(vocabulary, 3000):
        probes += [token + "q", token[:-1], token.upper(), "##" + token, token + "\x00"]
    for probe in probes:
        assert hashed.get(probe) == ids.get(probe), probe
    as_dict = WordPiece(ids, MAX_TOKENS)
    text = "A dict gives the same ids: unaffable, WordPiece-ing 42 things!"
    assert as_dict.encode(text) == WordPiece(hashed, MAX_TOKENS).encode(text)


def ascii_texts(vocabulary: list[str], count: int, seed: int) -> list[str]:
    """Texts mixing what the pipeline treats apart: vocabulary words and pieces,
    random letters (subwords and unknown words), capitals, digits, every ASCII
    punctuation and control character, every kind of whitespace, words over 100
    characters, and texts far over the token limit."""
    rng = random.Random(seed)
    words = [t for t in vocabulary if t.isascii() and not t.startswith("[")]
    controls = [chr(c) for c in (*range(0x20), 0x7F)]

    def word() -> str:
        kind = rng.random()
        if kind < 0.35:
            return rng.choice(words).removeprefix("##")
        if kind < 0.55:
            return "".join(rng.choices(string.ascii_letters, k=rng.randint(1, 14)))
        if kind < 0.62:
            return "".join(rng.choices(string.digits, k=rng.randint(1, 8)))
        if kind < 0.72:
            return "".join(rng.choices(string.punctuation, k=rng.randint(1, 3)))
        if kind < 0.77:
            return "".join(rng.choices(controls, k=rng.randint(1, 2)))
        if kind < 0.79:
            return "".join(rng.choices(string.ascii_lowercase + "#", k=rng.randint(95, 130)))
        return rng.choice(words).upper() + rng.choice(("", "s", "ing", "ed", "'s", "-like"))

    texts = []
    for n in range(count):
        size = rng.choice((0, 1, 2, 5, 12, 40)) if n % 50 else rng.randint(200, 500)
        glue = [
            rng.choice((" ", " ", " ", "", "\t", "\n", "\r\n", "  ", "\v", "\f"))
            for _ in range(size)
        ]
        texts.append(
            "".join(w + g for w, g in zip([word() for _ in range(size)], glue, strict=True))
        )
    return texts


def test_ascii_texts_get_the_librarys_ids(library, vocabulary, wordpiece):
    texts = ascii_texts(vocabulary, 6000, seed=23)
    texts += json.loads(REFERENCE.read_text())["sentences"]
    texts += ["", " ", "\x00", "a" * 100, "a" * 101, "##", "unaffable", "x" * 400]
    texts += ["When X, do Y because Z.", "it's 3.14159 -- e.g. foo_bar(baz)!", "[cls] lower"]
    ours = [wordpiece.encode(t) for t in texts]
    declined = [t for t, ids in zip(texts, ours, strict=True) if ids is None]
    assert len(declined) <= len(texts) // 100  # only texts holding a special marker
    theirs = [e.ids for e in library.encode_batch(texts)]
    for text, mine, expected in zip(texts, ours, theirs, strict=True):
        if mine is not None:
            assert mine == expected, repr(text)
    assert any(len(ids) == MAX_TOKENS for ids in theirs)  # truncation was exercised
    assert any(100 in ids for ids in theirs)  # and unknown words


@pytest.mark.parametrize(
    "text",
    [
        "café au lait",  # accents: Unicode normalisation is the library's
        "naïve Σ",
        "中文 text",
        "emoji 🙂",
        "non-breaking\u00a0space",
        "before [SEP] after",
        "[MASK]",
        "a [PAD] b",
        "[CLS]",
        "x[UNK]y",
    ],
)
def test_texts_it_cannot_vouch_for_go_to_the_library(wordpiece, text):
    assert wordpiece.encode(text) is None


def test_the_encoder_gives_the_same_vectors_either_way(tmp_path, monkeypatch, library):
    """Through the cache's vocabulary (Python) and through the library: the same
    ids, hence the same vectors, to the bit; and non-ASCII texts still embed."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    BertEncoder(PACKAGED_MODEL_DIR)  # makes the cache, vocabulary included
    fast = BertEncoder(PACKAGED_MODEL_DIR)
    assert fast.wordpiece is not None
    texts = ["When a migration fails, roll back in one transaction.", "x " * 300, "Ünïcode"]
    python_side = fast.encode(texts)
    assert fast._tokenizer is not None  # the Unicode text took the batch to the library
    ascii_only = fast.encode(texts[:2])
    slow = BertEncoder(PACKAGED_MODEL_DIR)
    slow.wordpiece = None
    assert np.array_equal(ascii_only, slow.encode(texts[:2]))
    assert np.array_equal(python_side, slow.encode(texts))
    fresh = BertEncoder(PACKAGED_MODEL_DIR)
    fresh.encode(texts[:2])
    assert fresh._tokenizer is None  # ASCII texts never started the library
