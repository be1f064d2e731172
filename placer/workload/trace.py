"""JSON Lines request traces and request logs (docs/contracts.md): one format, read and written here.

in:  a ``.jsonl`` file, one request per line, with ``timestamp`` (ms), ``input_length``,
     ``output_length`` and either ``hit_rate`` or ``hash_ids`` (the public Mooncake
     traces: ids of 512-token prefix blocks; equal ids = reusable prefix KV). The
     executor's request log (``placer deploy --request-log FILE``) writes these fields
     first on every line (`placer.records.request_log_line`) and its record's own after them;
     a log written before it did (``arrival_unix_s``, ``input_tokens``, ``output_tokens``,
     ``prefix_hit_tokens``) is still read.
out: :class:`TraceRecord` objects in arrival order, streamed (a trace is never held whole
     in memory: a request log, written as requests *end*, is put back in arrival order
     through a buffer of ``REORDER_HORIZON_S`` of trace time); for ``hash_ids`` records
     the hit rate an unbounded prefix cache would see.

Errors name the file, the line and the field, as :class:`~placer.errors.InputError`. Lines
come through :mod:`placer.readers` (UTF-8, at most 4 MiB a line, 64 levels deep, no ``NaN``
or ``Infinity``); lengths are whole numbers of at most ``placer.fields.MAX_TOKENS``,
timestamps finite within ±``MAX_TIMESTAMP_S`` seconds.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path

from placer.errors import InputError
from placer.fields import MAX_TIMESTAMP_S, MAX_TOKENS
from placer.prefix import cached_tokens, leading_blocks
from placer.readers import number, parse_data, text_lines
from placer.records import request_log_line  # noqa: F401  (the line format's one home; re-exported)

BLOCK_TOKENS = 512  # Mooncake traces hash prompts in 512-token blocks
#: A line may arrive this much trace time before one read earlier (a request log is written
#: as requests end, so a long request's line comes after shorter, later ones).
REORDER_HORIZON_S = 600.0


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


#: (lowest, highest) of each number of a trace line (timestamps in ms).
_BOUNDS = {"timestamp": (-MAX_TIMESTAMP_S * 1000.0, MAX_TIMESTAMP_S * 1000.0), "input_length": (0, MAX_TOKENS),
           "output_length": (0, MAX_TOKENS), "hit_rate": (-float("inf"), float("inf"))}  # [0, 1]: parse_record


def _number(obj: dict, key: str, where: str, integer: bool) -> float:
    """Field ``key`` of a line: finite, within :data:`_BOUNDS`, whole where ``integer``."""
    if key not in obj:
        raise InputError(f"{where}: missing field {key!r}")
    lo, hi = _BOUNDS[key]
    return number(obj[key], f"{where}: field {key!r}", lo=lo, hi=hi, integer=integer)


def _legacy_line(obj: dict, where: str) -> dict:
    """A request-log line from before the trace fields were written: the same request in them."""
    if "timestamp" in obj or "arrival_unix_s" not in obj:
        return obj
    n_in, hit_tokens = obj.get("input_tokens"), obj.get("prefix_hit_tokens", 0)
    hit = min(hit_tokens, n_in) / n_in if isinstance(n_in, int) and isinstance(hit_tokens, int) and n_in > 0 \
        else 0.0
    arrival = obj["arrival_unix_s"]
    number(arrival, f"{where}: field 'arrival_unix_s'", lo=-MAX_TIMESTAMP_S, hi=MAX_TIMESTAMP_S)  # before * 1000
    return {"timestamp": arrival * 1000.0,
            "input_length": n_in, "output_length": obj.get("output_tokens"), "hit_rate": hit}


def parse_record(obj: object, where: str) -> TraceRecord:
    """One trace line (already JSON-decoded) → :class:`TraceRecord`, or InputError."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: each line must be a JSON object")
    obj = _legacy_line(obj, where)
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
    """Stream the records of a JSONL trace in arrival order (blank lines skipped), at most ``limit``."""
    return itertools.islice(in_arrival_order(_file_records(path), str(Path(path).name)), limit)


def in_arrival_order(records: Iterable[tuple[int, TraceRecord]], name: str,
                     horizon_s: float = REORDER_HORIZON_S) -> Iterator[TraceRecord]:
    """``(line, record)`` pairs in file order → records by timestamp (stable for equal ones).

    Holds the records of the last ``horizon_s`` of trace time; a line more than that
    before one already passed on is an InputError naming it.
    """
    heap: list[tuple[float, int, TraceRecord]] = []
    emitted = -float("inf")
    for lineno, rec in records:
        if rec.timestamp_s < emitted:
            raise InputError(f"trace {name} line {lineno}: timestamp {rec.timestamp_s * 1000:.0f} ms is more than "
                             f"{horizon_s:g} s before a request on an earlier line; sort the file by timestamp")
        heapq.heappush(heap, (rec.timestamp_s, lineno, rec))
        while heap and heap[0][0] < rec.timestamp_s - horizon_s:
            emitted = heap[0][0]
            yield heapq.heappop(heap)[2]
    while heap:
        yield heapq.heappop(heap)[2]


def _file_records(path: str | Path) -> Iterator[tuple[int, TraceRecord]]:
    """``(line number, record)`` of every non-blank line, in file order."""
    path = Path(path)
    with closing(text_lines(path, "trace file")) as lines:  # UTF-8 lines; bad bytes name the line
        for lineno, line in lines:
            line = line.strip()
            if not line:
                continue
            where = f"trace {path.name} line {lineno}"
            yield lineno, parse_record(parse_data(line, "json", where), where)


def with_hit_rates(records: Iterable[TraceRecord], cache_tokens: int | None = None) -> Iterator[TraceRecord]:
    """Fill ``hit_rate`` of hash_ids records from a prefix cache, in trace order.

    A record's hit is the share of its prompt whose leading blocks the cache holds when it
    arrives; then the whole prompt's blocks enter the cache. ``cache_tokens`` None: a cache
    that never evicts (the trace's ideal hit, an upper bound on any real cache's); else an
    LRU of ``cache_tokens // BLOCK_TOKENS`` blocks (a hit refreshes the blocks it read), as
    the simulator's P-side prefix store (``placer.sim.drc.BlockCache``) evicts.
    """
    if cache_tokens is not None and cache_tokens < BLOCK_TOKENS:
        raise InputError(f"prefix cache of {cache_tokens} tokens holds no {BLOCK_TOKENS}-token block")
    capacity = None if cache_tokens is None else cache_tokens // BLOCK_TOKENS
    seen: OrderedDict[int, None] = OrderedDict()  # the ids name whole prefixes: a set (in LRU order) is the cache
    for rec in records:
        if rec.hit_rate is None and rec.hash_ids is not None:
            matched = leading_blocks(rec.hash_ids, seen)
            rec.hit_rate = cached_tokens(matched, rec.input_tokens, BLOCK_TOKENS) / rec.input_tokens
            for block in rec.hash_ids:
                seen[block] = None
                seen.move_to_end(block)
            while capacity is not None and len(seen) > capacity:
                seen.popitem(last=False)
        yield rec
