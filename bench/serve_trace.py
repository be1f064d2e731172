"""bench_serve's model, trace and setups: what the three setups serve and how they are laid out.

in:  a :class:`TraceConfig` (``QUICK`` or ``FULL``) and a seed
out: ``MODEL`` (the bench model: 32 KiB of KV per token, tiny compute), :func:`make_trace` (conversations and
     anomalous requests; when they open: :func:`lone_arrivals`, steady over the run for ``FULL``; the think times
     between a conversation's turns: :func:`think_times`, drawn for ``FULL``; the turns a conversation keeps:
     :func:`turns_kept`), :func:`setups` (same-dc-pd, cross-dc-pd, pdd: instances and routing),
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
    turns: int  # at most: a conversation that opens late keeps the turns that fit in the run (``turns_kept``)
    anomalous: int
    shared_tokens: int = 256  # system prompt + tool definitions, common to every conversation
    # a new conversation's own context: even conversations draw from the first range, odd from the second —
    # a short one whose KV crosses while RLD has made fewer tokens than catch_up_threshold_tokens (one-shot
    # handoff) and a long one over it (catch-up); the arithmetic in bench_serve's docstring
    first_user_tokens: tuple[int, int] = (80, 160)
    long_first_user_tokens: tuple[int, int] = (1300, 1500)
    turn_tokens: tuple[int, int] = (24, 56)  # what each later turn appends (reply + tool output)
    new_output_tokens: int = 320  # first turns: long answers (RLD still decoding when MD has the KV)
    turn_output_tokens: int = 16
    anomalous_tokens: int = 1300
    anomalous_output_tokens: int = 4
    stagger_s: float = 2.0  # between conversation openings: they open at a constant rate over the whole run
    think_s: float = 10.0  # between turns of one conversation: the mean where ``think`` draws them
    # how a conversation's think times come (:func:`think_times`): "fixed" (each exactly think_s) or "exponential"
    # (drawn, mean think_s, as placer's agentic workload draws them)
    think: str = "fixed"
    # a decoded token's seconds as the trace plans its turns (the bench's CPU steps with a neighbour: 11-15 ms);
    # the serve's own answers set when each turn really comes
    step_s: float = 0.015
    arrivals: str = "poisson"  # how the openings and the anomalous requests come: ``lone_arrivals``

    @property
    def span_s(self) -> float:
        """The run the trace plans: one stagger per conversation, the last opening one stagger before its end."""
        return self.conversations * self.stagger_s


QUICK = TraceConfig(conversations=5, turns=5, anomalous=2, turn_output_tokens=8, stagger_s=1.5,
                    think_s=5.0, arrivals="bunched")  # 27 requests, its openings in the first 6 s of ~30
# ten openings, one every 10 s on average (Poisson's gaps), 6 s of thinking, up to 6 turns each: ~50-58 requests over
# ~100 s, the decoders 25-37 % busy (bench_serve's docstring)
FULL = TraceConfig(conversations=10, turns=6, anomalous=6, stagger_s=10.0, think_s=6.0, think="exponential")


ARRIVALS = ("poisson", "even", "bunched")


def lone_arrivals(cfg: TraceConfig, seed: int) -> tuple[list[float], list[float]]:
    """When each conversation opens and each anomalous request comes (s from the run's start), by ``arrivals``:

    - ``poisson`` (``FULL``): a Poisson process at a constant rate over the run, conditioned on the counts —
      each opening and each anomalous request uniform in [0.2 s, :attr:`TraceConfig.span_s`), sorted: the steady
      load the planner plans for (its laws take Poisson arrivals at the mean rate);
    - ``even``: an opening every ``stagger_s`` from 0.2 s, the anomalous requests midway between two openings,
      spread evenly (more regular than Poisson: answers that rarely overlap, so the planner's TPOT reads high);
    - ``bunched`` (``QUICK``, the first shape): an opening every ``stagger_s``, the anomalous requests spread over
      the openings plus one conversation's turns (the openings' long answers crowd the run's first part).
    """
    if cfg.arrivals not in ARRIVALS:
        raise ValueError(f"TraceConfig.arrivals must be one of {', '.join(ARRIVALS)}, got {cfg.arrivals!r}")
    if cfg.arrivals == "poisson":
        rng = random.Random(seed + 7919)  # apart from the prompts' draws: the same prompts under any arrivals
        openings = _exponential_gaps(cfg.conversations, cfg.span_s, rng)
        # the anomalous requests' draw half their mean gap later (around the run's end): not with the first opening
        shift, run = cfg.span_s / (2 * max(cfg.anomalous, 1)), cfg.span_s - 0.2
        anomalous = _exponential_gaps(cfg.anomalous, cfg.span_s, rng)
        return openings, sorted(0.2 + (t - 0.2 + shift) % run for t in anomalous)
    openings = [0.2 + c * cfg.stagger_s for c in range(cfg.conversations)]
    if cfg.arrivals == "even":
        slots = [math.floor(cfg.conversations * (a + 0.5) / cfg.anomalous) for a in range(cfg.anomalous)]
        return openings, [openings[k] + cfg.stagger_s / 2 for k in slots]
    span = cfg.conversations * cfg.stagger_s + cfg.turns * cfg.think_s
    return openings, [span * (a + 0.5) / (cfg.anomalous + 0.5) for a in range(cfg.anomalous)]


def _exponential_gaps(n: int, span_s: float, rng: random.Random) -> list[float]:
    """``n`` arrival times from 0.2 s whose gaps are the exponential law's ``n`` quantiles (at (i + ½) / n), scaled to
    fill [0.2 s, ``span_s``) with the last gap past the last arrival: Poisson's spread of gaps in every draw, not a
    draw's luck (ten openings drawn at random put 10-41 % of the tokens in one quarter of the run, shuffled quantiles
    10-46 %). Their order: the longer and the shorter half alternate, each half in a seeded order."""
    gaps = [-math.log(1 - (i + 0.5) / n) for i in range(n)]
    short, long = gaps[:n // 2], gaps[n // 2:]
    rng.shuffle(short)
    rng.shuffle(long)
    # a long gap after each short one: the rate stays the same from the run's first quarter to its last
    gaps = [g for pair in zip(long, short) for g in pair] + long[len(short):]
    scale = (span_s - 0.2) / sum(gaps)
    times, t = [], 0.2
    for g in gaps:
        times.append(t)
        t += g * scale
    return times


THINKS = ("fixed", "exponential")


def think_times(cfg: TraceConfig, seed: int) -> list[list[float]]:
    """Per conversation, the think time before each of its later turns (``turns`` - 1 of them), by ``think``:

    - ``fixed``: each ``think_s``. Two conversations whose answers end at the same decode step (they shared the
      decoder's batch) then send all their later turns together, ending together again: locked in phase for the
      rest of the run (serve18b's pdd: 12 of its 55 arrival gaps under 0.2 s, 5.9 for Poisson arrivals at its rate,
      while the gaps' cv² read 0.90). A locked pair's second turn waits for the first's prefill and KV on the line:
      the simulated TTFT P50 on the served arrivals is +7-15 % over the same trace's unlocked ones, a clump no
      class or cv² holds;
    - ``exponential`` (``FULL``): drawn, mean ``think_s`` — a user's (or agent's tool call's) time varies, so no two
      conversations stay locked (placer's agentic workload, ``placer.workload.synthetic.AgenticSessions``, draws
      them so). Drawn from their own generator, apart from the prompts' draws."""
    if cfg.think not in THINKS:
        raise ValueError(f"TraceConfig.think must be one of {', '.join(THINKS)}, got {cfg.think!r}")
    if cfg.think == "fixed":
        return [[cfg.think_s] * (cfg.turns - 1) for _ in range(cfg.conversations)]
    rng = random.Random(seed + 15485863)
    return [[rng.expovariate(1.0 / cfg.think_s) for _ in range(cfg.turns - 1)] for _ in range(cfg.conversations)]


def turns_kept(cfg: TraceConfig, opening: float, thinks: list[float] | None = None) -> int:
    """The turns of a conversation opening at ``opening`` s (the first included): at most ``turns``, and unless
    ``bunched`` only those planned to arrive within the run (:attr:`TraceConfig.span_s`) with answers at
    ``step_s`` a token — so the openings, most of the output tokens, keep their rate to the run's end, and no
    tail of later turns outlasts them. ``thinks``: the conversation's think times (:func:`think_times`;
    ``think_s`` each without them)."""
    if cfg.arrivals == "bunched":
        return cfg.turns
    thinks = thinks if thinks is not None else [cfg.think_s] * (cfg.turns - 1)
    t = opening + cfg.new_output_tokens * cfg.step_s
    kept = 1
    while kept < cfg.turns and t + thinks[kept - 1] <= cfg.span_s:
        t += thinks[kept - 1] + cfg.turn_output_tokens * cfg.step_s
        kept += 1
    return kept


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
    """Conversations opening as ``arrivals`` says (:func:`lone_arrivals`; turn k+1 comes its think time
    (:func:`think_times`) after turn k's answer ended, as many turns as fit in the run: :func:`turns_kept`) and lone
    anomalous requests."""
    rng = random.Random(seed)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(256) for _ in range(n)]

    def cached(prefix: int, n: int) -> float:
        """The share of an n-token prompt a radix cache holding a prefix-token prefix reuses: whole
        blocks only (the engine's cache is block-granular), so a turn ships up to BLOCK - 1 more."""
        return (prefix - prefix % BLOCK) / n

    shared = [256, *tokens(cfg.shared_tokens)]
    openings, anomalous = lone_arrivals(cfg, seed)
    thinks = think_times(cfg, seed)
    out: list[TraceRequest] = []
    for c in range(cfg.conversations):
        context = shared + tokens(rng.randint(*(cfg.long_first_user_tokens if c % 2 else cfg.first_user_tokens)))
        out.append(TraceRequest(openings[c], tuple(context), cfg.new_output_tokens, "new",
                                cached(len(shared), len(context)), c, 0))
        for k in range(1, turns_kept(cfg, openings[c], thinks[c])):
            before = len(context)
            context = context + tokens(rng.randint(*cfg.turn_tokens))
            out.append(TraceRequest(thinks[c][k - 1], tuple(context), cfg.turn_output_tokens, "turn",
                                    cached(before, len(context)), c, k))
    for a in range(cfg.anomalous):
        prompt = shared + tokens(cfg.anomalous_tokens)
        out.append(TraceRequest(anomalous[a], tuple(prompt), cfg.anomalous_output_tokens, "anomalous",
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
    rows = sorted(((a, r) for a, r in zip(arrivals, trace) if not math.isnan(a)), key=lambda row: row[0])
    path.write_text("".join(json.dumps({"timestamp": a * 1000, "input_length": len(r.prompt),
                                        "output_length": r.max_tokens, "hit_rate": r.hit_estimate}) + "\n"
                            for a, r in rows))
    return len(rows)
