"""KV payload: the K/V of a token range, as P ships it and a decode instance receives it.

In: K/V tensors of positions `start..end-1` of a sequence and those tokens' ids.
Out: `KVPayload`, and its bytes for the wire (`to_bytes` / `from_bytes`).

Wire format: a safetensors blob — tensors by *name* (`k`, `v`) plus a string header
of *named* fields (`format`, `version`, `start`, `end`, `token_ids`, …). Nothing is
decoded by position, so fields can be added without breaking readers; a blob of
another format or version, or whose tensors disagree with its header, is rejected
with `KVPayloadError` naming what is wrong.

The blob is written and read here rather than by `safetensors.torch.save` / `load`
(any safetensors reader still reads it, and this one reads theirs): the format is an
8-byte header length, a JSON header, then the raw tensors, so writing it is one copy of
the tensors into the bytes and reading it one copy out. `bench/bench_kv_io.py`, a
1300-token payload of the bench's model (42 MB) on the 2-core CPU VM, 2026-12-03: alone,
`to_bytes` 22 ms against `safetensors.torch.save`'s 45 ms; beside two decoding engines both
are dominated by page faults on the fresh buffer (medians 104 and 60 ms in one run, maxima
410 and 643 ms; other runs the other way round). Served by bench_serve, P's exports went
8-45 ms at the median against 38-89 ms before.

A decoder importing a payload reads it with ``copy=False``: the tensors are then read-only views of
the received bytes, and the import's one copy is the one into its KV cache. A fresh 40 MB buffer per
import is what a page fault storm is made of on this VM: served, RLD's imports of new conversations
took 6-270 ms (median 36 ms) in pdd while P serialised the same KV for MD beside them, against 13-16
ms for payloads as large with nothing beside (bench_serve run r, 2026-12-04).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

# copy=False views immutable bytes on purpose; torch warns about that (once). Said here, once, for this
# module's calls only: warnings.catch_warnings around each call would race between decoder threads.
warnings.filterwarnings("ignore", "The given buffer is not writable", UserWarning, __name__)

KV_PAYLOAD_FORMAT = "placer-kv"
KV_PAYLOAD_VERSION = 1

# safetensors' dtype names
_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
           torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2"}
_BY_NAME = {name: dtype for dtype, name in _DTYPES.items()}
_MAX_HEADER = 100_000_000  # bytes of JSON header: past this the length field is garbage


class KVPayloadError(ValueError):
    """A KV payload is malformed, of an unknown version, or does not fit this engine."""


@dataclass(frozen=True, eq=False)
class KVPayload:
    """K/V of token positions `start..end-1`: each tensor `[num_layers, end-start, kv_heads, head_dim]`."""

    start: int
    end: int
    token_ids: tuple[int, ...]
    k: Tensor
    v: Tensor
    version: int = KV_PAYLOAD_VERSION

    def __post_init__(self) -> None:
        if self.version != KV_PAYLOAD_VERSION:
            raise KVPayloadError(
                f"unsupported KV payload version {self.version}; this engine reads version {KV_PAYLOAD_VERSION}"
            )
        if not 0 <= self.start <= self.end:
            raise KVPayloadError(f"token range must satisfy 0 <= start <= end, got start={self.start}, end={self.end}")
        n = self.end - self.start
        if len(self.token_ids) != n:
            raise KVPayloadError(f"token_ids has {len(self.token_ids)} ids for a range of {n} tokens")
        if self.k.dim() != 4 or self.k.shape[1] != n:
            raise KVPayloadError(
                f"k must be [num_layers, {n}, kv_heads, head_dim], got shape {tuple(self.k.shape)}"
            )
        if self.v.shape != self.k.shape or self.v.dtype != self.k.dtype:
            raise KVPayloadError(
                f"v ({tuple(self.v.shape)}, {self.v.dtype}) differs from k ({tuple(self.k.shape)}, {self.k.dtype})"
            )

    @property
    def num_tokens(self) -> int:
        return self.end - self.start

    @property
    def num_bytes(self) -> int:
        """Size of the K/V tensors (what crosses the link, header aside)."""
        return 2 * self.k.numel() * self.k.element_size()

    def to_bytes(self) -> bytes:
        """Self-describing bytes (safetensors with a named header): the tensors copied once."""
        meta = {
            "format": KV_PAYLOAD_FORMAT,
            "version": str(self.version),
            "start": str(self.start),
            "end": str(self.end),
            "token_ids": json.dumps(list(self.token_ids)),
        }
        k, v = self.k.detach().to("cpu").contiguous(), self.v.detach().to("cpu").contiguous()
        name = _DTYPES.get(k.dtype)
        if name is None:
            raise KVPayloadError(f"KV dtype {k.dtype} has no wire name; supported: {sorted(map(str, _DTYPES))}")
        n = k.numel() * k.element_size()
        header: dict = {"__metadata__": meta}
        for i, key in enumerate(("k", "v")):
            header[key] = {"dtype": name, "shape": list(k.shape), "data_offsets": [i * n, (i + 1) * n]}
        head = json.dumps(header, separators=(",", ":")).encode()
        head += b" " * (-len(head) % 8)  # the tensors start 8-byte aligned, as safetensors writes them
        return b"".join((len(head).to_bytes(8, "little"), head, _raw(k), _raw(v)))

    @classmethod
    def from_bytes(cls, data: bytes, *, copy: bool = True) -> KVPayload:
        """Parse `to_bytes` output; raises `KVPayloadError` on anything unexpected. ``copy=False``: `k`
        and `v` are views of ``data`` (no copy; read-only where ``data`` is: copy them to change them)."""
        header, body = _read_header(data)
        meta = header.get("__metadata__") or {}
        if not isinstance(meta, dict) or meta.get("format") != KV_PAYLOAD_FORMAT:
            fmt = meta.get("format") if isinstance(meta, dict) else None
            raise KVPayloadError(f"not a KV payload: format {fmt!r}, expected {KV_PAYLOAD_FORMAT!r}")
        try:
            version = int(meta["version"])
            start, end = int(meta["start"]), int(meta["end"])
            token_ids = tuple(int(t) for t in json.loads(meta["token_ids"]))
        except (KeyError, ValueError, TypeError) as exc:
            raise KVPayloadError(f"KV payload header is missing or has a bad field: {exc!r}") from exc
        if version != KV_PAYLOAD_VERSION:
            raise KVPayloadError(
                f"unsupported KV payload version {version}; this engine reads version {KV_PAYLOAD_VERSION}"
            )
        names = sorted(key for key in header if key != "__metadata__")
        if names != ["k", "v"]:
            raise KVPayloadError(f"KV payload must hold tensors 'k' and 'v', got {names}")
        k, v = (_tensor(data, body, key, header[key], copy) for key in ("k", "v"))
        return cls(start=start, end=end, token_ids=token_ids, k=k, v=v, version=version)


def _raw(t: Tensor):
    """A contiguous CPU tensor's bytes as a buffer, without a copy."""
    return t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b""


def _tensor(data: bytes, body: int, key: str, entry, copy: bool = True) -> Tensor:
    """Tensor ``key`` of a safetensors blob whose data starts at byte ``body``: a copy of its bytes, or
    (``copy`` False, the tensor aligned in the blob) a view of them."""
    try:
        dtype = _BY_NAME[entry["dtype"]]
        shape = [int(d) for d in entry["shape"]]
        a, b = (int(x) for x in entry["data_offsets"])
    except (KeyError, TypeError, ValueError) as exc:
        raise KVPayloadError(f"KV payload tensor {key!r} has a bad header entry {entry!r}: {exc!r}") from exc
    size = math.prod(shape) * dtype.itemsize
    if min(shape, default=0) < 0 or a < 0 or b - a != size:
        raise KVPayloadError(f"KV payload tensor {key!r}: {entry['dtype']} {shape} needs {size} bytes, "
                             f"its offsets [{a}, {b}) hold {b - a}")
    if body + b > len(data):
        raise KVPayloadError(f"KV payload tensor {key!r} ends at byte {b} of the data, which has {len(data) - body} "
                             "(the payload was cut short)")
    if not size:
        return torch.empty(shape, dtype=dtype)
    raw = memoryview(data)[body + a : body + b]
    if copy or (body + a) % dtype.itemsize:
        raw = bytearray(raw)  # the one copy: a tensor owns writable memory
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)


def _read_header(data: bytes) -> tuple[dict, int]:
    """The safetensors JSON header and the offset its tensor data starts at."""
    if len(data) < 8:
        raise KVPayloadError(f"KV payload too short ({len(data)} bytes)")
    n = int.from_bytes(data[:8], "little")
    if n > min(len(data) - 8, _MAX_HEADER):
        raise KVPayloadError(f"KV payload header length {n} exceeds the payload's {len(data) - 8} bytes")
    try:
        header = json.loads(bytes(data[8 : 8 + n]))
    except (ValueError, UnicodeDecodeError) as exc:
        raise KVPayloadError(f"KV payload header is not valid: {exc}") from exc
    if not isinstance(header, dict):
        raise KVPayloadError(f"KV payload header is a {type(header).__name__}, not an object")
    return header, 8 + n


def check_payload_layout(payload: KVPayload, num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> None:
    """Reject a payload whose K/V layout differs from the receiving engine's cache."""
    want = (num_layers, payload.num_tokens, num_kv_heads, head_dim)
    if tuple(payload.k.shape) != want:
        raise KVPayloadError(
            f"KV payload shape {tuple(payload.k.shape)} does not fit this engine: expected "
            f"[num_layers={num_layers}, tokens={payload.num_tokens}, kv_heads={num_kv_heads}, head_dim={head_dim}]"
        )
    if payload.k.dtype != dtype:
        raise KVPayloadError(f"KV payload dtype {payload.k.dtype} differs from this engine's KV dtype {dtype}")
