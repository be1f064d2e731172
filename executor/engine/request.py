"""A request's state as the engine sees it: tokens, KV extent, blocks, sampling.

In: a prompt and sampling settings. Out: the mutable record the scheduler, the block
manager and the engine update as the request runs.

Invariant: positions `0 .. num_kv_tokens-1` of `token_ids` have KV in `block_ids`
(block `i` holds positions `i*block_size .. (i+1)*block_size-1`); the tokens after
that are *pending* — the next forward computes their KV, and the logits of the last
one give the next token. A request that is decoding has exactly one pending token.
No torch here.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field

from executor.engine.radix_cache import PrefixHandle

_ids = itertools.count()


class RequestStatus(enum.Enum):
    """Where a request is in its life."""

    WAITING = "waiting"  # queued, holds no blocks
    RUNNING = "running"  # holds blocks (and a lock on its cached prefix)
    FINISHED = "finished"  # blocks handed back to the radix cache / pool


@dataclass(frozen=True)
class SamplingParams:
    """How the next token is chosen: greedy when `temperature == 0`."""

    temperature: float = 0.0
    seed: int = 0  # seeds this request's generator when temperature > 0
    max_new_tokens: int = 16
    stop_at_eos: bool = True

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass(eq=False)
class Request:
    """One sequence: prompt plus generated tokens, and where its KV lives."""

    token_ids: list[int]
    num_prompt_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    eos_token_id: int | None = None
    extra_eos_token_ids: tuple[int, ...] = ()  # further stop ids (Llama-3 instruct ends turns with <|eot_id|>)
    request_id: int = field(default_factory=lambda: next(_ids))
    status: RequestStatus = RequestStatus.WAITING
    num_kv_tokens: int = 0
    block_ids: list[int] = field(default_factory=list)
    num_cached_tokens: int = 0  # prefix tokens reused from the radix cache at admission
    prefix_handle: PrefixHandle | None = None  # locked while RUNNING
    generator: object | None = None  # torch.Generator for sampling, made by the runner

    def __post_init__(self) -> None:
        if not self.token_ids:
            raise ValueError("token_ids must not be empty")
        if not 0 < self.num_prompt_tokens <= len(self.token_ids):
            raise ValueError(
                f"num_prompt_tokens must be in [1, {len(self.token_ids)}], "
                f"got {self.num_prompt_tokens}"
            )

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_generated(self) -> int:
        """Tokens produced after the prompt."""
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def num_pending(self) -> int:
        """Tokens whose KV the next forward computes."""
        return len(self.token_ids) - self.num_kv_tokens

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    def reached_stop(self) -> bool:
        """True once the last token is EOS (when honoured) or the budget is spent."""
        if self.num_generated >= self.sampling.max_new_tokens:
            return True
        return self.ended_at_eos()

    def ended_at_eos(self) -> bool:
        """True when EOS is honoured and the last generated token is one of the EOS ids."""
        return (
            self.sampling.stop_at_eos
            and self.num_generated > 0
            and (self.token_ids[-1] == self.eos_token_id or self.token_ids[-1] in self.extra_eos_token_ids)
        )
