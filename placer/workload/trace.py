"""JSON Lines request traces (docs/contracts.md): reading, validating, deriving prefix hits.

in:  a ``.jsonl`` file, one request per line, with ``timestamp`` (ms), ``input_length``,
     ``output_length`` and either ``hit_rate`` or ``hash_ids`` (the public Mooncake
     traces: ids of 512-token prefix blocks; equal ids = reusable prefix KV)
out: :class:`TraceRecord` objects, streamed (a trace is never held whole in memory);
     for ``hash_ids`` records the hit rate an unbounded prefix cache would see.

Errors name the file, the line and the field, as :class:`~placer.errors.InputError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path

from placer.errors import InputError
from placer.readers import text_lines

BLOCK_TOKENS = 512  # Mooncake traces hash prompts in 512-token blocks


class TraceRecord:
    """One request of a trace. ``hit_rate`` is None until derived for hash_ids records."""

    __slots__ = ("timestamp_s", "input_tokens", "output_tokens", "hit_rate", "hash_ids")

    def __init__(self, timestamp_s: float, input_tokens: int, output_tokens: int,
                 hit_rate: float | None = None, hash_ids: tuple[int, ...] | None = None):
        self.timestamp_s = timestamp_s
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.hit_rate = hit_rate
        self.hash_ids = hash_ids

    def __repr__(self) -> str:
        return (f"TraceRecord(t={self.timestamp_s:.3f}s, in={self.input_tokens}, out={self.output_tokens}, "
                f"hit={self.hit_rate}, blocks={None if self.hash_ids is None else len(self.hash_ids)})")


def _number(obj: dict, key: str, where: str, integer: bool) -> float:
    if key not in obj:
        raise InputError(f"{where}: missing field {key!r}")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: field {key!r} must be a number, got {value!r}")
    if integer and value != int(value):
        raise InputError(f"{where}: field {key!r} must be a whole number, got {value!r}")
    return value


def parse_record(obj: object, where: str) -> TraceRecord:
    """One trace line (already JSON-decoded) → :class:`TraceRecord`, or InputError."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: each line must be a JSON object")
    ts = _number(obj, "timestamp", where, integer=False)
    n_in = int(_number(obj, "input_length", where, integer=True))
    n_out = int(_number(obj, "output_length", where, integer=True))
    if n_in <= 0:
        raise InputError(f"{where}: input_length must be > 0, got {n_in}")
    if n_out < 0:
        raise InputError(f"{where}: output_length must be >= 0, got {n_out}")
    hit, ids = None, None
    if "hit_rate" in obj:
        hit = float(_number(obj, "hit_rate", where, integer=False))
        if not 0.0 <= hit <= 1.0:
            raise InputError(f"{where}: hit_rate must be in [0, 1], got {hit}")
    elif "hash_ids" in obj:
        raw = obj["hash_ids"]
        if not isinstance(raw, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
            raise InputError(f"{where}: hash_ids must be a list of integers")
        ids = tuple(raw)
    else:
        raise InputError(f"{where}: needs 'hit_rate' or 'hash_ids'")
    return TraceRecord(ts / 1000.0, n_in, max(1, n_out), hit, ids)


def read_trace(path: str | Path, limit: int | None = None) -> Iterator[TraceRecord]:
    """Stream the records of a JSONL trace (blank lines skipped), at most ``limit`` of them."""
    path = Path(path)
    count = 0
    with closing(text_lines(path, "trace file")) as lines:  # UTF-8 lines; bad bytes name the line
        for lineno, line in lines:
            if limit is not None and count >= limit:
                return
            line = line.strip()
            if not line:
                continue
            where = f"trace {path.name} line {lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{where}: not valid JSON ({err.msg})") from None
            except RecursionError:
                raise InputError(f"{where}: JSON nested too deeply") from None
            yield parse_record(obj, where)
            count += 1


def cached_tokens(hash_ids: tuple[int, ...], input_tokens: int, present) -> int:
    """Tokens of the prompt covered by the longest run of leading blocks found in ``present``."""
    matched = 0
    for block in hash_ids:
        if block not in present:
            break
        matched += 1
    return min(matched * BLOCK_TOKENS, input_tokens)


def with_hit_rates(records: Iterable[TraceRecord]) -> Iterator[TraceRecord]:
    """Fill ``hit_rate`` of hash_ids records from an unbounded prefix cache, in trace order.

    A record's hit is the share of its prompt whose leading blocks an earlier request
    already produced (the best a prefix cache that never evicts can do).
    """
    seen: set[int] = set()
    for rec in records:
        if rec.hit_rate is None and rec.hash_ids is not None:
            rec.hit_rate = cached_tokens(rec.hash_ids, rec.input_tokens, seen) / rec.input_tokens
            seen.update(rec.hash_ids)
        yield rec
