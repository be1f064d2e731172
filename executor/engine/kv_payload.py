"""KV payload: the K/V of a token range, as P ships it and a decode instance receives it.

In: K/V tensors of positions `start..end-1` of a sequence and those tokens' ids.
Out: `KVPayload`, and its bytes for the wire (`to_bytes` / `from_bytes`).

Wire format: a safetensors blob — tensors by *name* (`k`, `v`) plus a string header
of *named* fields (`format`, `version`, `start`, `end`, `token_ids`, …). Nothing is
decoded by position, so fields can be added without breaking readers; a blob of
another format or version, or whose tensors disagree with its header, is rejected
with `KVPayloadError` naming what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import Tensor

KV_PAYLOAD_FORMAT = "placer-kv"
KV_PAYLOAD_VERSION = 1


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
        """Self-describing bytes (safetensors with a named header)."""
        header = {
            "format": KV_PAYLOAD_FORMAT,
            "version": str(self.version),
            "start": str(self.start),
            "end": str(self.end),
            "token_ids": json.dumps(list(self.token_ids)),
        }
        k, v = self.k.detach().to("cpu").contiguous(), self.v.detach().to("cpu").contiguous()
        if k.untyped_storage().data_ptr() == v.untyped_storage().data_ptr():
            v = v.clone()  # safetensors refuses tensors that share memory
        tensors = {"k": k, "v": v}
        return st_save(tensors, metadata=header)

    @classmethod
    def from_bytes(cls, data: bytes) -> KVPayload:
        """Parse `to_bytes` output; raises `KVPayloadError` on anything unexpected."""
        header = _read_header(data)
        if header.get("format") != KV_PAYLOAD_FORMAT:
            raise KVPayloadError(f"not a KV payload: format {header.get('format')!r}, expected {KV_PAYLOAD_FORMAT!r}")
        try:
            version = int(header["version"])
            start, end = int(header["start"]), int(header["end"])
            token_ids = tuple(int(t) for t in json.loads(header["token_ids"]))
        except (KeyError, ValueError, TypeError) as exc:
            raise KVPayloadError(f"KV payload header is missing or has a bad field: {exc!r}") from exc
        if version != KV_PAYLOAD_VERSION:
            raise KVPayloadError(
                f"unsupported KV payload version {version}; this engine reads version {KV_PAYLOAD_VERSION}"
            )
        try:
            tensors = st_load(data)
        except Exception as exc:  # safetensors raises its own error type for bad blobs
            raise KVPayloadError(f"KV payload tensors could not be read: {exc}") from exc
        if set(tensors) != {"k", "v"}:
            raise KVPayloadError(f"KV payload must hold tensors 'k' and 'v', got {sorted(tensors)}")
        return cls(start=start, end=end, token_ids=token_ids, k=tensors["k"], v=tensors["v"], version=version)


def _read_header(data: bytes) -> dict[str, str]:
    """The safetensors `__metadata__` block, read without loading tensors."""
    if len(data) < 8:
        raise KVPayloadError(f"KV payload too short ({len(data)} bytes)")
    n = int.from_bytes(data[:8], "little")
    try:
        meta = json.loads(data[8 : 8 + n]).get("__metadata__") or {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise KVPayloadError(f"KV payload header is not valid: {exc}") from exc
    return meta


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
