"""Model runner: executes one batch on the device with the chosen ops backend.

In: a `BatchKind` and, per sequence, its pending tokens, how many earlier tokens
already have KV and its block ids. Out: logits (fp32) of each sequence's last token
(or of every new token), with the new tokens' K/V written into the paged cache.

Owns the KV tensors: per layer `k_cache`/`v_cache` of shape
`[num_blocks, block_size, num_kv_heads, head_dim]`, indexed by the block ids the
block manager hands out. Attention per kind: PREFILL → varlen causal
`prefill_attention` on the fresh K/V; EXTEND → `extend_attention` over the cached
prefix; DECODE → paged `decode_attention`. K/V are written to the cache before
attention in every kind (the kernels' contract).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import accumulate

import torch
from torch import Tensor

from executor.engine.model import LlamaModel
from executor.engine.scheduler import BatchKind


@dataclass(frozen=True)
class SeqInput:
    """One sequence of a batch: its pending tokens over `num_kv_tokens` cached ones."""

    new_token_ids: tuple[int, ...]
    num_kv_tokens: int
    block_ids: tuple[int, ...]


class ModelRunner:
    """The model plus its paged KV cache on one device."""

    def __init__(self, model: LlamaModel, num_blocks: int, block_size: int) -> None:
        c = model.config
        self.model = model
        self.device = model.device
        self.block_size = block_size
        self.num_blocks = num_blocks
        shape = (num_blocks, block_size, c.num_kv_heads, c.head_dim)
        self.k_caches = [torch.zeros(shape, dtype=model.dtype, device=self.device) for _ in range(c.num_layers)]
        self.v_caches = [torch.zeros(shape, dtype=model.dtype, device=self.device) for _ in range(c.num_layers)]
        self.sm_scale = 1.0 / math.sqrt(c.head_dim)

    # ---- forward -------------------------------------------------------------------

    @torch.no_grad()
    def forward(self, kind: BatchKind, seqs: list[SeqInput], all_logits: bool = False) -> Tensor:
        """Run the batch; logits [B, vocab] of last tokens, or [T, vocab] if `all_logits`."""
        self._check_batch(kind, seqs)
        ops, dev, i32 = self.model.ops, self.device, torch.int32
        input_ids, positions, slots = [], [], []
        for s in seqs:
            input_ids.extend(s.new_token_ids)
            pos = range(s.num_kv_tokens, s.num_kv_tokens + len(s.new_token_ids))
            positions.extend(pos)
            slots.extend(self._slots(s.block_ids, pos))
        max_blocks = max(len(s.block_ids) for s in seqs)
        page_table = torch.tensor(
            [list(s.block_ids) + [0] * (max_blocks - len(s.block_ids)) for s in seqs], dtype=i32, device=dev
        )
        extend_lens = [len(s.new_token_ids) for s in seqs]
        prefix_lens = torch.tensor([s.num_kv_tokens for s in seqs], dtype=i32, device=dev)
        seq_lens = torch.tensor([s.num_kv_tokens + n for s, n in zip(seqs, extend_lens)], dtype=i32, device=dev)
        cu_seqlens = torch.tensor([0, *accumulate(extend_lens)], dtype=i32, device=dev)
        slot_t = torch.tensor(slots, dtype=torch.long, device=dev)
        extend_t = torch.tensor(extend_lens, dtype=i32, device=dev)

        def attend(layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            kc, vc = self.k_caches[layer], self.v_caches[layer]
            kc.view(-1, *kc.shape[2:]).index_copy_(0, slot_t, k)
            vc.view(-1, *vc.shape[2:]).index_copy_(0, slot_t, v)
            if kind is BatchKind.PREFILL:
                return ops.prefill_attention(q, k, v, cu_seqlens, self.sm_scale)
            if kind is BatchKind.EXTEND:
                return ops.extend_attention(q, kc, vc, page_table, prefix_lens, extend_t, self.sm_scale)
            return ops.decode_attention(q, kc, vc, page_table, seq_lens, self.sm_scale)

        hidden = self.model.forward(
            torch.tensor(input_ids, dtype=torch.long, device=dev),
            torch.tensor(positions, dtype=torch.long, device=dev),
            attend,
        )
        if not all_logits:
            hidden = hidden[cu_seqlens[1:].long() - 1]
        return self.model.logits(hidden)

    # ---- KV access (export / import) -------------------------------------------------

    @torch.no_grad()
    def read_kv(self, block_ids: list[int], start: int, end: int) -> tuple[Tensor, Tensor]:
        """K and V of positions `start..end-1`, each `[num_layers, end-start, kv_heads, head_dim]`."""
        slots = torch.tensor(self._slots(block_ids, range(start, end)), dtype=torch.long, device=self.device)
        c = self.k_caches[0]
        k = torch.empty(len(self.k_caches), end - start, *c.shape[2:], dtype=c.dtype, device=c.device)
        v = torch.empty_like(k)
        for layer, (kc, vc) in enumerate(zip(self.k_caches, self.v_caches)):
            torch.index_select(kc.view(-1, *kc.shape[2:]), 0, slots, out=k[layer])
            torch.index_select(vc.view(-1, *vc.shape[2:]), 0, slots, out=v[layer])
        return k, v

    @torch.no_grad()
    def write_kv(self, block_ids: list[int], start: int, k: Tensor, v: Tensor) -> None:
        """Store K/V `[num_layers, T, kv_heads, head_dim]` at positions `start..start+T-1`."""
        slots = torch.tensor(
            self._slots(block_ids, range(start, start + k.shape[1])), dtype=torch.long, device=self.device
        )
        k = k.to(device=self.device, dtype=self.model.dtype)
        v = v.to(device=self.device, dtype=self.model.dtype)
        for layer, (kc, vc) in enumerate(zip(self.k_caches, self.v_caches)):
            kc.view(-1, *kc.shape[2:]).index_copy_(0, slots, k[layer])
            vc.view(-1, *vc.shape[2:]).index_copy_(0, slots, v[layer])

    # ---- internals -----------------------------------------------------------------

    def _slots(self, block_ids, positions: range) -> list[int]:
        bs = self.block_size
        if len(positions) and (positions[-1] // bs) >= len(block_ids):
            raise ValueError(
                f"position {positions[-1]} needs block {positions[-1] // bs} "
                f"but the sequence has {len(block_ids)} blocks"
            )
        return [block_ids[p // bs] * bs + p % bs for p in positions]

    @staticmethod
    def _check_batch(kind: BatchKind, seqs: list[SeqInput]) -> None:
        if not seqs:
            raise ValueError("empty batch")
        if any(not s.new_token_ids for s in seqs):
            raise ValueError("every sequence in a batch needs at least one new token")
        if kind is BatchKind.PREFILL and any(s.num_kv_tokens for s in seqs):
            raise ValueError("a PREFILL batch cannot have cached KV; use EXTEND")
        if kind is BatchKind.DECODE and any(len(s.new_token_ids) != 1 for s in seqs):
            raise ValueError("a DECODE batch takes exactly one new token per sequence; use EXTEND")


def sample(logits: Tensor, temperatures: list[float], generators: list[torch.Generator | None]) -> list[int]:
    """Next token per row: argmax where temperature is 0, else a seeded draw."""
    out = logits.argmax(dim=-1).tolist()
    for row, (temp, gen) in enumerate(zip(temperatures, generators, strict=True)):
        if temp > 0:
            probs = torch.softmax(logits[row] / temp, dim=-1)
            out[row] = int(torch.multinomial(probs, 1, generator=gen).item())
    return out
