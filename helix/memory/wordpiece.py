"""BERT's uncased WordPiece tokenizer for ASCII text, in plain Python.

The tokenizers library takes 20-25 ms to start in a fresh process (its import, then
building the 30,522-entry vocabulary out of tokenizer.json), as long as the rest of
the model's load together, and a hook embeds one short text. For ASCII text the
pipeline of all-MiniLM-L6-v2's tokenizer.json is short enough to write down
exactly, and this does it from the vocabulary alone, looked up in place in the
arrays cached with the model's weights (:class:`HashedVocabulary`):

1. normalise (BertNormalizer, clean_text and lowercase): control characters are
   dropped, except tab, newline and carriage return, which become spaces; NUL
   too; letters are lowercased (stripping accents and spacing out CJK characters
   change nothing in ASCII);
2. split (BertPreTokenizer): on whitespace, and every punctuation character (the
   32 of ASCII) stands alone, so the words are runs of letters and digits;
3. WordPiece: the longest vocabulary entry at the start of a word, then the
   longest ``##``-prefixed entry at each later position; a word with a position
   nothing matches, or longer than 100 characters, is one ``[UNK]``;
4. truncate to ``max_tokens`` with ``[CLS]`` first and ``[SEP]`` last.

A text it cannot vouch for gets None, and the encoder asks the library instead:
any non-ASCII character (Unicode's categories, accents and CJK handling are the
library's), or a special-token marker such as ``[SEP]``, which the library matches
in the raw text before normalising. ``tests/test_wordpiece.py`` holds the two to the
same ids on thousands of texts.
"""

from __future__ import annotations

import re
import zlib
from array import array
from collections.abc import Sequence
from typing import Protocol

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_WORD_CHARS = 100  # the model's max_input_chars_per_word
# Control characters are dropped; tab, newline and carriage return become spaces.
_CLEAN = {c: None for c in (*range(0x00, 0x20), 0x7F)} | {0x09: 0x20, 0x0A: 0x20, 0x0D: 0x20}
# After cleaning, what is not a space is a letter, a digit or punctuation.
_WORDS = re.compile(r"[0-9a-z]+|[!-/:-@\[-`{-~]")


class TokenIds(Protocol):
    """token -> id, None for a string that is not a token (a dict is one)."""

    def get(self, token: str, /) -> int | None: ...


class HashedVocabulary:
    """A read-only token -> id map over three flat arrays, looked up in place:
    building a dict of the 30,522 tokens, and freeing it at exit, cost a fresh
    process 5-8 ms (measured), more than tokenizing. ``tokens`` holds every token's
    UTF-8 bytes back to back, ``offsets`` (n + 1 of them) where each starts, and
    ``slots`` an open-addressing table of twice as many slots as tokens: a token
    sits at the CRC-32 of its bytes, or the next free slot after it; -1 is free.
    Views of any buffers of bytes, uint32 and int32 will do (the cache's memory
    map, or what :meth:`build` returns)."""

    def __init__(self, tokens: memoryview, offsets: memoryview, slots: memoryview):
        self._tokens = tokens.cast("B")
        self._offsets = offsets.cast("B").cast("I")
        self._slots = slots.cast("B").cast("i")
        self._mask = len(self._slots) - 1

    def get(self, token: str, /) -> int | None:
        key = token.encode("utf-8")
        slot = zlib.crc32(key) & self._mask
        while (found := self._slots[slot]) >= 0:
            if self._tokens[self._offsets[found] : self._offsets[found + 1]] == key:
                return found
            slot = (slot + 1) & self._mask
        return None

    @staticmethod
    def build(vocabulary: Sequence[str]) -> tuple[bytes, array[int], array[int]]:
        """(tokens, offsets, slots) of ``vocabulary`` (the tokens in id order)."""
        encoded = [token.encode("utf-8") for token in vocabulary]
        offsets = array("I", [0])
        for token in encoded:
            offsets.append(offsets[-1] + len(token))
        size = 1 << max(4, (2 * len(encoded) - 1).bit_length())
        slots = array("i", [-1]) * size
        for n, token in enumerate(encoded):
            slot = zlib.crc32(token) & (size - 1)
            while slots[slot] >= 0:
                slot = (slot + 1) & (size - 1)
            slots[slot] = n
        return b"".join(encoded), offsets, slots


class WordPiece:
    """Token ids of ASCII texts, exactly as the model's tokenizer.json gives them."""

    def __init__(self, ids: TokenIds, max_tokens: int):
        """``ids``: token -> id (a dict, or the cache's :class:`HashedVocabulary`);
        ``max_tokens``: the truncation length, special tokens included."""
        self.ids = ids
        special = [ids.get(t) for t in ("[UNK]", "[CLS]", "[SEP]")]
        if None in special:
            raise ValueError("the vocabulary has no [UNK], [CLS] or [SEP]")
        self.unk, self.cls, self.sep = (int(i) for i in special if i is not None)
        self.max_tokens = max_tokens
        self._words: dict[str, list[int]] = {}  # a text's words recur: each split once

    def encode(self, text: str) -> list[int] | None:
        """``[CLS]``, the word pieces of ``text`` (truncated), ``[SEP]``; None when
        the text is not ASCII or holds a special-token marker."""
        if not text.isascii() or ("[" in text and any(t in text for t in SPECIAL_TOKENS)):
            return None
        ids = [self.cls]
        room = self.max_tokens - 1
        for word in _WORDS.findall(text.translate(_CLEAN).lower()):
            pieces = self._words.get(word)
            if pieces is None:
                pieces = self._words[word] = self._pieces(word)
            ids += pieces
            if len(ids) >= room:
                del ids[room:]
                break
        ids.append(self.sep)
        return ids

    def _pieces(self, word: str) -> list[int]:
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                found = self.ids.get(word[start:end] if start == 0 else "##" + word[start:end])
                if found is not None:
                    pieces.append(found)
                    start = end
                    break
            else:  # no entry starts here: the whole word is unknown
                return [self.unk]
        return pieces
