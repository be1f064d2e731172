"""bench_serve's model, trace and setups: what the three setups serve and how they are laid out.

in:  a :class:`TraceConfig` (``QUICK`` or ``FULL``) and a seed
out: ``MODEL`` (the bench model: 32 KiB of KV per token, tiny compute), :func:`make_trace` (conversations and
     anomalous requests), :func:`setups` (same-dc-pd, cross-dc-pd, pdd: instances and routing),
     :func:`engine_config`, :func:`request_class` (the planner's class of a request), :func:`trace_file` (the
     trace as served, as placer's JSONL trace). The trace's arithmetic is in ``bench/bench_serve.py``'s docstring.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from executor.engine import EngineConfig, ModelConfig
from executor.placement import InstanceSpec
from executor.routing import Pipeline, RoutingPolicy
from placer.pdd import FilterRule


# ---- the model: big KV per token, tiny compute -------------------------------------------------

MODEL = ModelConfig(num_layers=2, hidden_size=64, num_q_heads=2, num_kv_heads=2, head_dim=1024,
                    intermediate_size=128)  # 2 × 2 × 2 × 1024 × 4 B = 32 KiB of KV per token
BLOCK = 16

# ---- the trace -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceConfig:
    conversations: int
    turns: int
    anomalous: int
    shared_tokens: int = 256  # system prompt + tool definitions, common to every conversation
    # a new conversation's own context: even conversations draw from the first range, odd from the second —
    # a short one whose KV crosses while RLD has made fewer tokens than catch_up_threshold_tokens (one-shot
    # handoff) and a long one over it (catch-up); the arithmetic in the module's docstring
    first_user_tokens: tuple[int, int] = (80, 160)
    long_first_user_tokens: tuple[int, int] = (1300, 1500)
    turn_tokens: tuple[int, int] = (24, 56)  # what each later turn appends (reply + tool output)
    new_output_tokens: int = 320  # first turns: long answers (RLD still decoding when MD has the KV)
    turn_output_tokens: int = 16
    anomalous_tokens: int = 1300
    anomalous_output_tokens: int = 4
    stagger_s: float = 2.0  # between conversation starts
    think_s: float = 10.0  # between turns of one conversation


QUICK = TraceConfig(conversations=5, turns=5, anomalous=2, turn_output_tokens=8, stagger_s=1.5,
                    think_s=5.0)  # 27 requests
FULL = TraceConfig(conversations=12, turns=8, anomalous=6)  # 102 requests: see p90_spread


@dataclass(frozen=True)
class TraceRequest:
    t_s: float  # turn 0 and anomalous: arrival time; later turns: think time after the previous answer
    prompt: tuple[int, ...]
    max_tokens: int
    kind: str  # new | turn | anomalous
    hit_estimate: float  # what the engines' prefix caches hold of it: whole blocks (see cached)
    conv: int = -1  # conversation (-1: a lone anomalous request)
    turn: int = 0


def make_trace(cfg: TraceConfig, seed: int) -> list[TraceRequest]:
    """Conversations (turn k+1 comes `think_s` after turn k's answer ended) and lone anomalous requests."""
    rng = random.Random(seed)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(256) for _ in range(n)]

    def cached(prefix: int, n: int) -> float:
        """The share of an n-token prompt a radix cache holding a prefix-token prefix reuses: whole
        blocks only (the engine's cache is block-granular), so a turn ships up to BLOCK - 1 more."""
        return (prefix - prefix % BLOCK) / n

    shared = [256, *tokens(cfg.shared_tokens)]
    out: list[TraceRequest] = []
    for c in range(cfg.conversations):
        start = 0.2 + c * cfg.stagger_s
        context = shared + tokens(rng.randint(*(cfg.long_first_user_tokens if c % 2 else cfg.first_user_tokens)))
        out.append(TraceRequest(start, tuple(context), cfg.new_output_tokens, "new", cached(len(shared), len(context)),
                                c, 0))
        for k in range(1, cfg.turns):
            before = len(context)
            context = context + tokens(rng.randint(*cfg.turn_tokens))
            out.append(TraceRequest(cfg.think_s, tuple(context), cfg.turn_output_tokens, "turn",
                                    cached(before, len(context)), c, k))
    span = cfg.conversations * cfg.stagger_s + cfg.turns * cfg.think_s
    for a in range(cfg.anomalous):
        prompt = shared + tokens(cfg.anomalous_tokens)
        t = span * (a + 0.5) / (cfg.anomalous + 0.5)
        out.append(TraceRequest(t, tuple(prompt), cfg.anomalous_output_tokens, "anomalous",
                                cached(len(shared), len(prompt))))
    return out


# ---- the three setups --------------------------------------------------------------------------------

FILTER = {"filter_min_input_tokens": 1024, "filter_max_hit_rate": 0.5, "filter_max_output_tokens": 32}


def setups() -> dict[str, tuple[list[InstanceSpec], RoutingPolicy]]:
    pd = RoutingPolicy(allowed=frozenset({Pipeline.P_D}))
    return {
        "same-dc-pd": ([InstanceSpec("p0", "P", "dc-a", "CPU"), InstanceSpec("d0", "D", "dc-a", "CPU")], pd),
        "cross-dc-pd": ([InstanceSpec("p0", "P", "dc-a", "CPU"), InstanceSpec("d0", "D", "dc-b", "CPU")], pd),
        "pdd": ([InstanceSpec("p0", "P", "dc-a", "CPU"), InstanceSpec("rld0", "RLD", "dc-a", "CPU"),
                 InstanceSpec("md0", "MD", "dc-b", "CPU")],
                RoutingPolicy(direct_min_hit_rate=0.8,
                              filter_rule=FilterRule(**{k.removeprefix("filter_"): v for k, v in FILTER.items()}))),
    }


def engine_config(trace: list[TraceRequest]) -> EngineConfig:
    """A KV pool that holds every conversation's last context and every output, with room to spare."""
    last: dict[int, TraceRequest] = {}
    for r in trace:
        if r.conv < 0 or r.turn >= last.get(r.conv, r).turn:
            last[r.conv if r.conv >= 0 else -1 - len(last)] = r
    tokens = sum(len(r.prompt) for r in last.values()) + sum(r.max_tokens for r in trace)
    tokens = int(tokens * 1.5)
    return EngineConfig(backend="torch", block_size=BLOCK, num_blocks=tokens // BLOCK + 256,
                        max_prefill_tokens=4096)


def shared_prefix(trace: list[TraceRequest]) -> tuple[int, ...]:
    """The tokens every conversation's prompt starts with (the system prompt and tool definitions)."""
    prompts = [r.prompt for r in trace if r.conv >= 0]
    n = min(len(p) for p in prompts)
    k = next((i for i in range(n) if len({p[i] for p in prompts}) > 1), n)
    return prompts[0][:k]


CLASSES = ("new", "new-long", "turn", "turn-long", "anomalous")


def request_class(r: TraceRequest) -> str:
    """The planner's class of a trace request: its kind, "-long" for the long conversations (odd ones)."""
    return r.kind + ("-long" if r.conv >= 0 and r.conv % 2 else "")


def trace_file(path: Path, trace: list[TraceRequest], arrivals: list[float]) -> int:
    """The trace as served (same prompts, the arrival times it had) as placer's JSONL trace."""
    rows = sorted((a, r) for a, r in zip(arrivals, trace) if not math.isnan(a))
    path.write_text("".join(json.dumps({"timestamp": a * 1000, "input_length": len(r.prompt),
                                        "output_length": r.max_tokens, "hit_rate": r.hit_estimate}) + "\n"
                            for a, r in rows))
    return len(rows)
