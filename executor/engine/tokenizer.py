"""Byte-level tokenizer: UTF-8 bytes are token ids 0..255, then BOS and EOS.

In: text. Out: token ids (and back). Lossless for any string; decoding skips the
special ids and replaces invalid UTF-8 (a cut-off multi-byte character) with U+FFFD.
"""

from __future__ import annotations

from collections.abc import Iterable


class ByteTokenizer:
    """256 byte tokens plus `bos_id` = 256 and `eos_id` = 257."""

    bos_id = 256
    eos_id = 257
    vocab_size = 258

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [self.bos_id, *ids] if add_bos else ids

    def decode(self, ids: Iterable[int]) -> str:
        out = bytearray()
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
            if i < 256:
                out.append(i)
        return out.decode("utf-8", errors="replace")
