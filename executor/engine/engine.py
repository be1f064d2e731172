"""The single-instance inference engine: the operations P, RLD and MD are built from.

In: token ids (prompts, handed-off tokens), KV payloads. Out: next tokens, logits,
KV payloads, and the request records that carry the state between calls.

Two ways in:
- **Role operations** (the caller owns the request and calls `finish` at the end):
  `prefill` → `export_kv` (P); `import_kv` → `decode_step`… (RLD); `import_kv` →
  `extend` with the relay's token ids → `decode_step`… (MD).
- **Serving loop**: `submit` requests, `step` the continuous-batching scheduler;
  `generate` / `generate_batch` are conveniences over these.

Request lifecycle and KV ownership: a request is RUNNING from `prefill` / `import_kv`
until `finish`; meanwhile it holds a pool reference on each of its blocks and a lock
on its cached prefix. Its tokens split into those with KV (`num_kv_tokens`) and the
*pending* ones: every forward computes the pending tokens' KV and appends one
sampled token, which is pending in turn. On `finish` its whole blocks go to the radix
cache (reusable by later requests with the same prefix) and the rest to the pool.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from executor.engine.block_pool import OutOfBlocksError
from executor.engine.config import EngineConfig, ModelConfig
from executor.engine.forward_log import ForwardLog
from executor.engine.kv_manager import BlockManager
from executor.engine.kv_payload import KVPayload, KVPayloadError, check_payload_layout
from executor.engine.memory import keep_freed_memory
from executor.engine.model import LlamaModel, init_weights, load_weights, save_weights
from executor.engine.request import Request, RequestStatus, SamplingParams
from executor.engine.runner import ModelRunner, SeqInput, sample
from executor.engine.scheduler import BatchKind, Scheduler, batch_kind_for
from executor.engine.tokenizer import ByteTokenizer
from placer_kernels import get_ops


class PrefixMissingError(RuntimeError):
    """`import_kv` got a payload that starts past the prefix this engine has cached."""


@dataclass(frozen=True)
class PrefillResult:
    """What `prefill` produced: the first output token and where the prompt's KV lives."""

    request: Request
    first_token: int
    block_ids: tuple[int, ...]
    num_cached_tokens: int  # prompt tokens whose KV came from the radix cache


@dataclass(frozen=True)
class ExtendResult:
    """What `extend` produced: logits of every forwarded token and the next token."""

    next_token: int
    logits: Tensor  # fp32 [num_forwarded, vocab]; row i scores the token after forwarded token i
    num_forwarded: int


class Engine:
    """One model instance with its paged KV cache, radix prefix cache and scheduler."""

    def __init__(
        self,
        model_config: ModelConfig,
        engine_config: EngineConfig,
        weights: dict[str, Tensor],
        device: str | torch.device,
        tokenizer: Any = None,
    ) -> None:
        """`tokenizer`: text ↔ ids and the EOS ids (default: the byte tokenizer of the tiny model)."""
        keep_freed_memory()  # KV payloads reuse freed memory instead of faulting pages in: engine/memory.py
        self.model_config = model_config
        self.config = engine_config
        self.device = torch.device(device)
        self.tokenizer = tokenizer or ByteTokenizer()
        self.model = LlamaModel(model_config, weights, get_ops(engine_config.backend), self.device)
        self.runner = ModelRunner(self.model, engine_config.num_blocks, engine_config.block_size)
        self.blocks = BlockManager(
            engine_config.num_blocks, engine_config.block_size, engine_config.enable_prefix_cache
        )
        self.scheduler = Scheduler(
            self.blocks, engine_config.max_running_requests, engine_config.max_prefill_tokens,
            engine_config.chunked_prefill_tokens,
        )
        self._owned: weakref.WeakSet[Request] = weakref.WeakSet()  # requests made here
        self.forward_log = ForwardLog()  # what each prefill, extend and decode step cost as served

    # ---- construction ----------------------------------------------------------------

    @classmethod
    def from_seed(
        cls, model_config: ModelConfig, engine_config: EngineConfig, *, seed: int, device: str | torch.device
    ) -> Engine:
        """An engine with deterministic random weights."""
        return cls(model_config, engine_config, init_weights(model_config, seed), device)

    @classmethod
    def from_file(
        cls, path: str | Path, engine_config: EngineConfig, *, device: str | torch.device, dtype: str | None = None
    ) -> Engine:
        """An engine whose config and weights come from a `save` file (safetensors); `dtype` overrides its own."""
        model_config, weights = load_weights(path)
        if dtype is not None:
            model_config = dataclasses.replace(model_config, dtype=dtype)
        return cls(model_config, engine_config, weights, device)

    @classmethod
    def from_checkpoint(cls, checkpoint: Any, engine_config: EngineConfig, *, device: str | torch.device) -> Engine:
        """An engine over a loaded Hugging Face checkpoint (`executor.engine.hf.Checkpoint`) and its tokenizer."""
        return cls(checkpoint.config, engine_config, checkpoint.weights, device, tokenizer=checkpoint.tokenizer)

    @classmethod
    def from_pretrained(
        cls, model_dir: str | Path, engine_config: EngineConfig, *, device: str | torch.device,
        dtype: str = "float32",
    ) -> Engine:
        """An engine over a local Hugging Face-format directory (config.json, safetensors, tokenizer.json)."""
        from executor.engine.hf import load_checkpoint

        return cls.from_checkpoint(load_checkpoint(model_dir, dtype), engine_config, device=device)

    @classmethod
    def build(cls, model: Any, engine_config: EngineConfig, *, seed: int, device: str | torch.device) -> Engine:
        """An engine over `model`: a `ModelConfig` (random weights from `seed`) or a loaded `Checkpoint`."""
        if isinstance(model, ModelConfig):
            return cls.from_seed(model, engine_config, seed=seed, device=device)
        return cls.from_checkpoint(model, engine_config, device=device)

    def save(self, path: str | Path) -> None:
        """Write this engine's model config and weights to a safetensors file."""
        save_weights(path, self.model_config, self.model.weights)

    # ---- role operations -------------------------------------------------------------

    def prefill(self, tokens: Sequence[int], sampling: SamplingParams | None = None) -> PrefillResult:
        """Compute a prompt's KV, reusing its cached prefix, and sample the first token.

        Only the uncached suffix is forwarded (extend attention over the cached
        prefix), in forwards of at most `chunked_prefill_tokens` when that is set. The
        prompt's whole blocks are published to the radix cache as their KV is computed.
        """
        start = self.forward_log.clocks()
        req = self._new_request(tokens, len(tokens), sampling)
        self._admit(req, limit_tokens=len(tokens) - 1, kv_tokens=len(tokens))
        chunk = self.config.chunked_prefill_tokens
        while chunk is not None and req.num_pending > chunk:
            self._forward([req], num_new=(chunk,))
        (token,), _ = self._forward([req])
        req.token_ids.append(token)
        self.forward_log.add("prefill", len(tokens) - req.num_cached_tokens, req.num_cached_tokens, start)
        return PrefillResult(req, token, tuple(req.block_ids), req.num_cached_tokens)

    def decode_step(self, requests: Sequence[Request]) -> list[int]:
        """One decode step for a batch: each request's pending token → its next token."""
        start = self.forward_log.clocks()
        for req in requests:
            self._check_running(req)
            if req.num_pending != 1:
                raise ValueError(
                    f"request {req.request_id} has {req.num_pending} pending tokens; "
                    "decode_step takes exactly one (use extend for more)"
                )
        for req in requests:
            self.blocks.grow(req, req.num_tokens)
        tokens, _ = self._forward(list(requests))
        for req, token in zip(requests, tokens):
            req.token_ids.append(token)
        if requests:
            context = sum(r.num_kv_tokens for r in requests) / len(requests)
            self.forward_log.add("decode", len(requests), context, start)
        return tokens

    def extend(self, request: Request, token_ids: Sequence[int]) -> ExtendResult:
        """Append `token_ids` and compute the KV of all pending tokens in ONE forward.

        MD's extend-decode after the token-ID handoff: with the first token still
        pending and the relay's tokens given, this equals that many decode steps.
        The sampled next token is appended (and pending).
        """
        self._check_running(request)
        start = self.forward_log.clocks()
        request.token_ids.extend(int(t) for t in token_ids)
        if request.num_pending == 0:
            raise ValueError(f"request {request.request_id}: nothing to extend (no pending tokens)")
        self.blocks.grow(request, request.num_tokens)
        n = request.num_pending
        cached = request.num_kv_tokens
        (token,), logits = self._forward([request], all_logits=True)
        request.token_ids.append(token)
        self.forward_log.add("extend", n, cached, start)
        return ExtendResult(token, logits, n)

    def export_kv(self, request: Request, start: int, end: int) -> KVPayload:
        """The KV of positions `start..end-1` of a running request."""
        self._check_running(request)
        if not 0 <= start <= end <= request.num_kv_tokens:
            raise ValueError(
                f"export range [{start}, {end}) must lie within the {request.num_kv_tokens} tokens with KV"
            )
        k, v = self.runner.read_kv(request.block_ids, start, end)
        return KVPayload(start=start, end=end, token_ids=tuple(request.token_ids[start:end]), k=k, v=v)

    def import_kv(
        self,
        tokens: Sequence[int],
        payload: KVPayload,
        sampling: SamplingParams | None = None,
        num_prompt_tokens: int | None = None,
    ) -> Request:
        """Start a request from received KV: positions before `payload.start` must be cached here.

        `tokens` is the whole sequence; those past `payload.end` (e.g. P's first
        token) are pending. Returns a RUNNING request, its KV published to the radix
        cache. Raises `KVPayloadError` for a payload that does not fit, and
        `PrefixMissingError` when this engine lacks the prefix the payload skips.
        """
        c = self.model_config
        check_payload_layout(payload, c.num_layers, c.num_kv_heads, c.head_dim, self.model.dtype)
        if len(tokens) < payload.end or tuple(tokens[payload.start : payload.end]) != payload.token_ids:
            raise KVPayloadError(
                f"payload tokens [{payload.start}, {payload.end}) do not match the given token ids"
            )
        req = self._new_request(tokens, num_prompt_tokens or payload.end, sampling)
        cached = self.blocks.acquire_prefix(req, payload.end)
        if cached < payload.start:
            self.blocks.release(req)
            raise PrefixMissingError(
                f"this engine caches {cached} tokens of the prefix but the payload starts at "
                f"{payload.start}; send KV from token {cached}"
            )
        try:
            self.blocks.grow(req, payload.end)
        except OutOfBlocksError:
            self.blocks.release(req)
            raise
        skip = cached - payload.start
        self.runner.write_kv(req.block_ids, cached, payload.k[:, skip:], payload.v[:, skip:])
        req.num_kv_tokens = payload.end
        req.status = RequestStatus.RUNNING
        self.blocks.publish(req)
        return req

    def cached_prefix_len(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of `tokens` this engine's radix cache holds KV for."""
        match = self.blocks.peek_prefix(list(tokens))
        return match.num_tokens if match else 0

    def finish(self, request: Request) -> None:
        """End a request: its whole blocks go to the radix cache, the rest to the pool."""
        if request not in self._owned:
            raise ValueError(f"request {request.request_id} belongs to another engine")
        if request.status is RequestStatus.FINISHED:
            return
        if request.status is RequestStatus.WAITING and request in self.scheduler.waiting:
            self.scheduler.waiting.remove(request)
        if request in self.scheduler.running:
            self.scheduler.running.remove(request)
        self.blocks.release(request)
        request.status = RequestStatus.FINISHED

    # ---- serving loop ----------------------------------------------------------------

    def submit(self, tokens: Sequence[int], sampling: SamplingParams | None = None) -> Request:
        """Queue a prompt for the continuous-batching loop (`step`)."""
        req = self._new_request(tokens, len(tokens), sampling)
        self.scheduler.add(req)
        return req

    def step(self) -> list[tuple[Request, int]]:
        """Run one scheduled batch; returns each request in it with its new token."""
        batch = self.scheduler.schedule()
        if batch is None:
            return []
        tokens, _ = self._forward(list(batch.requests), kind=batch.kind, num_new=batch.num_new_tokens)
        self.scheduler.postprocess(batch, tokens)
        return [(r, t) for r, t in zip(batch.requests, tokens) if t is not None]

    def generate_batch(
        self, prompts: Sequence[Sequence[int]], sampling: SamplingParams | None = None
    ) -> list[list[int]]:
        """Output tokens for each prompt, all served by the continuous-batching loop."""
        reqs = [self.submit(p, sampling) for p in prompts]
        while self.scheduler.has_work():
            self.step()
        return [r.output_ids for r in reqs]

    def generate(
        self, prompt_tokens: Sequence[int], max_new_tokens: int, sampling: SamplingParams | None = None
    ) -> list[int]:
        """Output tokens of one prompt (prefill then decode steps), up to EOS or the budget."""
        base = sampling or SamplingParams()
        params = SamplingParams(base.temperature, base.seed, max_new_tokens, base.stop_at_eos)
        req = self.prefill(prompt_tokens, params).request
        try:
            while not req.reached_stop():
                self.decode_step([req])
        finally:
            self.finish(req)
        return req.output_ids

    # ---- internals -------------------------------------------------------------------

    def _new_request(self, tokens: Sequence[int], num_prompt: int, sampling: SamplingParams | None) -> Request:
        ids = [int(t) for t in tokens]
        bad = [t for t in ids if not 0 <= t < self.model_config.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} are outside the vocabulary [0, {self.model_config.vocab_size})")
        eos = tuple(getattr(self.tokenizer, "eos_ids", ()))
        req = Request(ids, num_prompt, sampling or SamplingParams(), eos_token_id=self.tokenizer.eos_id,
                      extra_eos_token_ids=eos[1:])
        self._owned.add(req)
        return req

    def _admit(self, req: Request, limit_tokens: int, kv_tokens: int) -> None:
        self.blocks.acquire_prefix(req, limit_tokens)
        try:
            self.blocks.grow(req, kv_tokens)
        except OutOfBlocksError:
            self.blocks.release(req)
            raise
        req.status = RequestStatus.RUNNING

    def _check_running(self, req: Request) -> None:
        if req not in self._owned:
            raise ValueError(f"request {req.request_id} belongs to another engine")
        if req.status is not RequestStatus.RUNNING:
            raise ValueError(f"request {req.request_id} is {req.status.value}, not running")

    def _forward(
        self, requests: list[Request], all_logits: bool = False, kind: BatchKind | None = None,
        num_new: tuple[int, ...] = (),
    ) -> tuple[list[int | None], Tensor]:
        """Forward `num_new` pending tokens of each request (default: all); sample one token for
        each request whose pending tokens are all computed (not appended), None for one mid-prefill.

        Decode rows (one token over KV) are not published to the radix cache; every other row is.
        """
        if all_logits and len(requests) != 1:
            raise ValueError("all_logits is for a single request")
        counts = num_new or tuple(r.num_pending for r in requests)
        kind = kind or batch_kind_for(requests, counts)
        seqs = [
            SeqInput(tuple(r.token_ids[r.num_kv_tokens : r.num_kv_tokens + n]), r.num_kv_tokens, tuple(r.block_ids))
            for r, n in zip(requests, counts, strict=True)
        ]
        logits = self.runner.forward(kind, seqs, all_logits=all_logits)
        publish = [n > 1 or r.num_kv_tokens == 0 for r, n in zip(requests, counts)]
        for r, n, pub in zip(requests, counts, publish):
            r.num_kv_tokens += n
            if pub:
                self.blocks.publish(r)
        done = [i for i, r in enumerate(requests) if r.num_pending == 0]
        last = logits[-1:] if all_logits else logits[done]
        sampled = sample(last, [requests[i].sampling.temperature for i in done],
                         [self._generator(requests[i]) for i in done])
        tokens: list[int | None] = [None] * len(requests)
        for i, t in zip(done, sampled):
            tokens[i] = t
        return tokens, logits

    def _generator(self, req: Request) -> torch.Generator | None:
        if req.sampling.temperature == 0:
            return None
        if req.generator is None:
            req.generator = torch.Generator(device=self.device).manual_seed(req.sampling.seed)
        return req.generator
