"""Aggregated serving (role A, pipeline A): one instance prefills and decodes, its prompts'
chunks mixed into its decode steps (continuous batching with chunked prefill, as vLLM and
SGLang run by default) — the physics, defined once for the MILP, `evaluate`, `validate`
and the simulator.

in:  an :class:`~placer.perfmodel.InstanceModel`, the problem's classes and SLA, a chunk size
out: :class:`AggDesign` (design batch, step, prefill budget), each class's prefill seconds
     and its share of the budget, the queue law of the budget, TTFT, the prefill share of
     the instance's time (for the per-token prices), the queue label.

Model. An A instance at chunk C steps B decode sequences plus up to C prompt tokens in one
forward (:meth:`~placer.perfmodel.InstanceModel.mixed_step_s`). The design is conservative:
every step is taken to carry a full chunk, so the TPOT every decoding request sees is
t(B, C) ≤ TPOT, and B is the largest batch meeting it and memory (which keeps room for one
prompt's KV). The interference is therefore in B: the bigger C, the longer t(B, C) and the
fewer sequences fit the TPOT.

* Prefill budget: C/t prompt tokens per second per instance. A prompt of n = (1 − h)·I new
  tokens takes the budget for n·t/C seconds (its last chunk shares its step with the next
  prompt's first, as the engines pack them), and reaches its first token after ⌈n/C⌉ steps
  when it has the budget alone: TTFT₀ = ⌈n/C⌉·t. No KV moves: the first token is streamed
  by the instance that prefilled it.
* The budget is one FCFS server (M/G/1, service n·t/C): a "mix" queue carries the classes in
  the scenario's proportions (its moments are the mix's), a "light" one only the classes
  whose TTFT₀ is at most :data:`placer.flows.HEAVY_PREFILL_SHARE` of the TTFT SLA (its law
  bounded by the longest light service).
* Memory: a request's KV is resident for its prefill (TTFT₀) at its prompt and for its
  decode (O·t) at I + O/2 on average (Little's law).

Why it wins or loses, from first principles: short prompts at a loose TTFT fit whole in one
or a few chunks whose FLOPs ride in the memory-bound slack of decode steps, so no P
instance, no second weight read and no KV move is paid; long prompts under a tight TPOT need
hundreds of chunk-steps each, every chunk lengthens the step of the whole batch (so C and B
must shrink), and a dedicated P instance, whose forwards are thousands of tokens at full
compute efficiency, prefills them at a fraction of the cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from placer.flows import TtftTail, decode_context_tokens
from placer.pdd import AGG, HEAVY_PREFILL_SHARE, MIX, queue_chunk_tokens
from placer.perfmodel import InstanceModel
from placer.queueing import WaitModel

if TYPE_CHECKING:
    from placer.problem import Class, Problem

#: Chunk sizes (prompt tokens per aggregated step) tried by default, largest first: per chip and tp
#: the planner keeps the :data:`AUTO_CHUNKS_KEPT` largest whose design meets the TPOT.
AUTO_CHUNK_TOKENS = (8192, 4096, 2048, 1024, 512, 256, 128, 64)
AUTO_CHUNKS_KEPT = 2


def new_tokens(c: Class) -> float:
    """Prompt tokens a request computes: those its prefix cache lacks (at least one)."""
    return max(1.0, (1.0 - c.hit_rate) * c.input_tokens)


def chunk_start_tokens(classes: Sequence[Class]) -> float:
    """Mean prefix position behind a prompt token being prefilled, weighted by where chunks run
    (share × new tokens): h·I + n/2 per class."""
    weight = sum(c.share * new_tokens(c) for c in classes)
    return sum(c.share * new_tokens(c) * (c.hit_rate * c.input_tokens + new_tokens(c) / 2)
               for c in classes) / weight


@dataclass(frozen=True)
class AggDesign:
    """One aggregated instance at chunk ``chunk_tokens``: design batch and step (batch 0: none meets TPOT)."""

    im: InstanceModel
    chunk_tokens: int
    batch: int
    step_s: float
    context_tokens: float  # mean decode context of the mix
    chunk_start_tokens: float

    def prefill_s(self, c: Class) -> float:
        """TTFT without queueing: the prompt's ⌈n/C⌉ chunk-steps."""
        return math.ceil(new_tokens(c) / self.chunk_tokens - 1e-9) * self.step_s

    def service_s(self, c: Class) -> float:
        """Seconds of the prefill budget one prompt takes: n·t/C."""
        return new_tokens(c) * self.step_s / self.chunk_tokens

    def decode_s(self, c: Class) -> float:
        """Seconds the request decodes (one token per step)."""
        return c.output_tokens * self.step_s / self.im.mtp_accept

    def resident_byte_s(self, c: Class, kv_bytes_per_token: float) -> float:
        """KV byte-seconds one request holds: its prompt during prefill, I + O/2 while decoding."""
        return (self.prefill_s(c) * c.input_tokens
                + self.decode_s(c) * (c.input_tokens + c.output_tokens / 2)) * kv_bytes_per_token


def agg_design(problem: Problem, im: InstanceModel, chunk_tokens: int) -> AggDesign:
    """The design of an A instance ``im`` at ``chunk_tokens``: the largest B meeting the TPOT SLA
    with a full chunk in every step, and memory with one prompt's room (B = 0: none)."""
    ctx = decode_context_tokens(problem.classes)
    start = chunk_start_tokens(problem.classes)
    batch = im.max_batch(ctx, problem.tpot_s, chunk_tokens=chunk_tokens, chunk_start_tokens=start)
    step = im.mixed_step_s(max(batch, 1), ctx, chunk_tokens, start)
    return AggDesign(im, chunk_tokens, batch, step, ctx, start)


def chunk_choices(problem: Problem, im: InstanceModel) -> list[int]:
    """The chunk sizes to plan an A instance ``im`` at: ``options.agg_chunk_tokens`` when given, else
    the :data:`AUTO_CHUNKS_KEPT` largest of :data:`AUTO_CHUNK_TOKENS` whose design has a batch
    meeting the TPOT (a bigger chunk buys prefill budget and a shorter TTFT, a smaller one batch)."""
    if im.pp > 1:  # a mixed step through a pipeline is not modelled: no aggregated pipelines
        return []
    if problem.options.agg_chunk_tokens:
        return list(problem.options.agg_chunk_tokens)
    meeting = [c for c in AUTO_CHUNK_TOKENS if agg_design(problem, im, c).batch >= 1]
    return meeting[:AUTO_CHUNKS_KEPT]


def at_batch(design: AggDesign, batch: float) -> AggDesign:
    """The same design stepping at another batch (evaluate: the batch the plan's load settles at)."""
    step = design.im.mixed_step_s(max(batch, 1.0), design.context_tokens, design.chunk_tokens,
                                  design.chunk_start_tokens)
    return AggDesign(design.im, design.chunk_tokens, int(round(batch)), step, design.context_tokens,
                     design.chunk_start_tokens)


def agg_light_classes(problem: Problem, design: AggDesign) -> set[int]:
    """Classes whose TTFT₀ on ``design`` is at most HEAVY_PREFILL_SHARE of the TTFT SLA."""
    budget = HEAVY_PREFILL_SHARE * problem.ttft_p90_s
    return {k for k, c in enumerate(problem.classes) if design.prefill_s(c) <= budget}


def agg_wait_law(problem: Problem, design: AggDesign, rho: float, mix: str) -> WaitModel:
    """M/G/1 wait for the prefill budget at utilisation ``rho``: the mix's moments ("mix"), or
    the longest light service as a deterministic bound ("light")."""
    if mix == MIX:
        times = [(c.share, design.service_s(c)) for c in problem.classes]
        return WaitModel(rho, sum(s * t for s, t in times), sum(s * t * t for s, t in times))
    longest = max(design.service_s(problem.classes[k]) for k in agg_light_classes(problem, design))
    return WaitModel(rho, longest, longest * longest)


def served_wait_law(design: AggDesign, items: Sequence[tuple[float, Class]], instances: float) -> WaitModel:
    """M/G/1 wait for the budget of a queue carrying ``items`` (req/s, class) over ``instances``."""
    lam = sum(r for r, _ in items)
    mean = sum(r * design.service_s(c) for r, c in items) / lam
    second = sum(r * design.service_s(c) ** 2 for r, c in items) / lam
    rho = lam * mean / instances if instances > 0 else 1.0
    return WaitModel(min(rho, 1.0), mean, second)


def agg_first_token_law(design: AggDesign, c: Class, wait: WaitModel) -> tuple[float, TtftTail]:
    """(TTFT without queueing, random tail): ⌈n/C⌉ steps, and the budget's wait."""
    return design.prefill_s(c), TtftTail(wait)


def agg_prefill_time_share(design: AggDesign, budget_utilization: float) -> float:
    """Share of an A instance's time its prefill takes: the chunk's marginal step time,
    (t(B, C) − t(B, 0)) / t(B, C), for the fraction of steps that carry one."""
    alone = design.im.step_s(max(design.batch, 1), design.context_tokens)
    marginal = max(0.0, design.step_s - alone) / design.step_s
    return min(1.0, budget_utilization) * marginal


def plan_designs(problem: Problem, plan: Any, models: dict) -> dict[tuple, AggDesign]:
    """Each A pool's design in ``plan`` (``models``: pool key → instance model): at the largest
    chunk its queues name (a step carries at most one chunk; conservative when queues
    differ), else the largest of :func:`chunk_choices` whose design meets the TPOT (a
    hand-written plan without queues), else the smallest chunk tried."""
    designs = {}
    for key, im in models.items():
        if key[0] != AGG:
            continue
        named = [queue_chunk_tokens(a.queue) for a in plan.assignments
                 if a.key == key]
        tried = chunk_choices(problem, im)
        chunks = [c for c in named if c] or [c for c in tried if agg_design(problem, im, c).batch >= 1]
        designs[key] = agg_design(problem, im, max(chunks) if chunks else min(tried or AUTO_CHUNK_TOKENS))
    return designs


@dataclass(frozen=True)
class AggInstanceModel(InstanceModel):
    """An A instance as the simulator runs it: a prefill server whose every forward is one
    design step carrying up to ``prefill_chunk_tokens`` prompt tokens (prompts packed FCFS,
    as placer.sim.prefill does), beside a decode server whose every step is a mixed step
    (:meth:`~placer.perfmodel.InstanceModel.mixed_step_s`). The two halves keep their own
    clocks; each step's time already includes the other half's share of the forward, so
    together they replay the MILP's model of one instance doing both."""

    agg_chunk_start_tokens: float = 0.0
    agg_design_step_s: float = 0.0

    def step_s(self, batch: float, context_tokens: float) -> float:
        return self.mixed_step_s(batch, context_tokens, self.prefill_chunk_tokens, self.agg_chunk_start_tokens)

    def forward_s(self, flops: float, mem_bytes: float, tokens: float) -> float:
        return self.agg_design_step_s


def sim_model(design: AggDesign) -> AggInstanceModel:
    """The simulator's model of an A instance at ``design``."""
    im = design.im
    return AggInstanceModel(im.chip, im.tp, im.model, im.weight_dtype, im.kv_dtype, design.chunk_tokens,
                            im.mtp_accept, agg_chunk_start_tokens=design.chunk_start_tokens,
                            agg_design_step_s=design.step_s)

