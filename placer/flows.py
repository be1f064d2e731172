"""The physics of a flow: KV bytes and seconds, queue laws, what TTFT is.

in:  the performance model (:mod:`placer.perfmodel`), PDD's names and rules
     (:mod:`placer.pdd`); a :class:`~placer.problem.Problem` and its classes as arguments
     (imported for typing only)
out: :class:`Route`, one flow (problem, class, pipeline, src → dst, DRC, its P instance model
     and receiving peer) that answers its own physics: KV bytes and seconds over the WAN
     (:meth:`Route.wan_bytes`, :meth:`Route.wan_s`), until the first decoder holds the KV
     (:meth:`Route.first_kv_s`) and while P keeps it staged (:meth:`Route.staged_kv_s`), and
     its TTFT law (:meth:`Route.first_token_law`); beside it RLD's eager tokens, its hold of a
     relayed request through the handoff (:func:`relay_stop_s`) and its KV room for relayed
     requests (:func:`relay_room_factor`), the decode context and design — per the classes a
     pool serves, by the KV admission rule of :mod:`placer.kv_admission`
     (:func:`decode_design_for`, :func:`decode_kv_headroom`; a class's weight on the step is
     :mod:`placer.decode_slots`'),
     what TTFT is (:func:`ttft_det_s`); re-exported from :mod:`placer.ttft_tail`: the TTFT tail
     (:class:`TtftTail`, :func:`ps_sojourn_var_s2`, :func:`line_batchmates`). The P queues' laws
     (light classes, waiting times, the layout of a pool's queues, the TTFT mixture quantile) are
     :mod:`placer.p_queues`.

The MILP, `evaluate`, `validate` and the simulator take their flow physics from here and
it imports none of them. The executor does not import it: it needs PDD's rules only
(:mod:`placer.pdd`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from placer.pdd import (
    ADAPTIVE, CATCH_UP, DEFAULT_CATCH_UP, DEFAULT_CATCH_UP_THRESHOLD_TOKENS, FIRST_TOKEN_STREAMER, P_D, P_RLD_MD,
    RELAY_PIPELINES, RLD, CatchUpRule, handoff_mode,
)
from placer.executor_costs import first_token_added_s, stream_step_s
from placer.kv_admission import KvHeadroom, fixed_step_share, footprint_tokens, kv_design_batch
from placer.perfmodel import InstanceModel
from placer.perfmodel.engines import engine_model
from placer.queueing import WaitModel, spread_points, spread_prompt, wan_transfer_s
from placer.shapes import TP as SHAPE_TP
from placer.shapes import Shape, is_moe, legacy_shape, shape_model
from placer.ttft_tail import (LineLoad, TtftTail, congestion_var_factor, line_batchmates, pack_extension,
                              ps_sojourn_var_s2)

if TYPE_CHECKING:
    from placer.problem import Class, Problem

# --- instances and KV timing ----------------------------------------------------------

def pool_shape(problem: Problem, chip: str, tp: int) -> Shape:
    """The shape of a pool key element: ``tp`` itself when it is a :class:`~placer.shapes.Shape`; for a
    plain ``int`` (plan rows written before shapes) :func:`~placer.shapes.legacy_shape`, with the
    deprecated ``options.pipeline_parallel``."""
    if isinstance(tp, Shape):
        return tp
    return legacy_shape(problem.model, problem.chips[chip], tp, problem.weight_dtype, problem.kv_dtype,
                        problem.options.pipeline_parallel)


def instance(problem: Problem, chip: str, tp: int) -> InstanceModel:
    """The performance model of one instance of ``tp`` chips of ``chip`` in the shape
    :func:`pool_shape` gives (:func:`placer.shapes.shape_model`).

    A :class:`~placer.profiles.measured.MeasuredInstanceModel` replaces the roofline when the problem
    carries a measured table for (chip, chips) and the shape is one the tables are measured in (dense
    ``tp``/``pp``, MoE ``dep``: the layouts placer had before shapes); it answers from the table inside
    its grid, from the roofline outside. Otherwise the problem's ``engine`` answers
    (:func:`~placer.perfmodel.engines.engine_model`: that engine's measured kernels where they cover the
    chip, transferred from the nearest measured chip where they do not; ``roofline``: the roofline); a
    measured table, the user's own measurement of the whole forward, wins over the kernels.

    One object per (chip, tp) and problem (:attr:`~placer.problem.Problem.instance_models`): what it works
    out and keeps (prefill times, settled P queues: :mod:`placer.packed_queue`) serves every later
    question about the problem — a plan's figures, its check and its "why" ask the same queues again."""
    models = problem.instance_models
    model = models.get((chip, tp))
    if model is None:
        model = models[(chip, tp)] = _instance(problem, chip, tp)
    return model


def _instance(problem: Problem, chip: str, tp: int) -> InstanceModel:
    shape = pool_shape(problem, chip, tp)
    args = (problem.model, problem.weight_dtype, problem.kv_dtype, problem.options.prefill_chunk_tokens)
    table = problem.tables.get((chip, shape.chips))
    if table is None or (shape.kind == SHAPE_TP and is_moe(problem.model)):
        return engine_model(shape_model(shape, problem.chips[chip], *args), problem.engine)
    # Imported only when a table matches: the executor imports this module and, by
    # tests/executor/test_imports.py, loads no placer.profiles submodule.
    from placer.profiles.measured import MeasuredInstanceModel

    return MeasuredInstanceModel(problem.chips[chip], shape.chips, *args, pp=shape.pp, table=table)


def decode_context_tokens(classes: Sequence[Class]) -> float:
    """Mean resident context of a decoding request, weighted by time in the batch (share × output)."""
    weight = sum(c.share * c.output_tokens for c in classes)
    return sum(c.share * c.output_tokens * (c.input_tokens + c.output_tokens / 2) for c in classes) / weight


def eager_tokens(wan_s: float, output_tokens: int, step_s: float) -> float:
    """Tokens RLD streams while the KV crawls to MD (at least t0, at most the output): one per
    step of RLD's own batch, ``step_s`` (its design step, :func:`decode_design`) — not one
    per TPOT: RLD holds the request for the whole transfer whatever its step."""
    if not math.isfinite(wan_s):
        return float(output_tokens)
    return float(min(output_tokens, max(1, math.ceil(wan_s / step_s))))


def relay_stop_s(wan_s: float, rtt_s: float, step_s: float, policy: str = ADAPTIVE,
                 threshold_tokens: int = DEFAULT_CATCH_UP_THRESHOLD_TOKENS,
                 rule: CatchUpRule = DEFAULT_CATCH_UP) -> float:
    """Seconds RLD holds (and decodes) a P-RLD-MD request: until its KV has crossed the line
    (``wan_s``), then through the token-ID handoff until RLD sends the final batch
    (:class:`~placer.pdd.HandoffProtocol`, timed by :func:`placer.sim.handoff.plan_handoff`):
    MD's MainReady takes one way back (rtt/2), and RLD keeps decoding meanwhile. One-shot stops
    there; catch-up (more than ``threshold_tokens`` pending under the adaptive ``policy``) runs
    rounds of one round trip each (the extends are short next to a WAN round trip) until a batch
    carries at most ``rule.final_batch_tokens`` — one more round when a round trip produces that
    few tokens, else until ``rule.max_rounds``. RLD decodes one token per ``step_s`` throughout."""
    if not math.isfinite(wan_s):
        return wan_s
    one_way = rtt_s / 2
    pending = int((wan_s + one_way) / step_s) if step_s > 0 else 0
    if handoff_mode(policy, pending, threshold_tokens) != CATCH_UP:
        return wan_s + one_way
    per_round = rtt_s / step_s if step_s > 0 else 0.0
    rounds = 2 if per_round <= rule.final_batch_tokens else rule.max_rounds
    return wan_s + one_way + (rounds - 1) * rtt_s


#: RLD's KV room is planned for this quantile of the relay requests it holds at once: at
#: most 1 % of relay arrivals (PASTA) find it full and wait to be admitted (their first
#: token waits with them) — a tenth of the 10 % of late requests a P90 SLA allows.
RELAY_ROOM_QUANTILE = 0.99


def relay_room_factor(line_utilization: float, quantile: float = RELAY_ROOM_QUANTILE) -> float:
    """Peak-to-mean ratio of the relay requests RLD holds at once, for a line at ``line_utilization``.

    RLD holds a P-RLD-MD request (its KV and slot) until that request's KV has crossed the
    line. The line shares its rate among its transfers (processor sharing), and in an
    M/G/1-PS queue the number N of transfers in flight is geometric whatever the sizes:
    P(N ≥ n) = ρⁿ, mean ρ/(1−ρ). Little's law gives RLD the mean (λ·T, what the MILP's
    memory row counts); transfers that bunch on the line bunch on RLD too, so room for
    the ``quantile`` of N takes ln(1−q)/ln ρ requests: this factor times the mean (≥ 1).
    The line's traffic is taken to be all relayed (an upper bound on RLD's share)."""
    rho = min(max(line_utilization, 1e-6), 1 - 1e-6)
    mean = rho / (1 - rho)
    return max(1.0, math.log(1 - quantile) / math.log(rho) / mean)


def footprint_points(c: Class) -> list[tuple[float, float, int]]:
    """A class's requests as a decoder holds them: (share of its arrivals, output tokens, reserved KV
    tokens) per point of the two-point laws (:func:`placer.queueing.spread_points`: the same mean and
    variance; one point, the mean, without a spread) of its prompt's new tokens (``new_tokens_cv2``,
    behind its cached prefix: :func:`placer.queueing.spread_prompt`, the class workload's rule) and of
    its output (``output_tokens_cv2``), drawn independently as the class workload draws them. A request
    holds its reservation (:func:`placer.kv_admission.footprint_tokens`, prompt + output in blocks) for
    a time ∝ its output, so long outputs weigh twice: in the KV held and in the time held; a long
    prompt only in the KV held."""
    prompts = [(p, c.input_tokens if factor == 1.0 else spread_prompt(c.input_tokens, c.hit_rate, factor)[0])
               for p, factor in spread_points(getattr(c, "new_tokens_cv2", 0.0))]
    return [(p_in * p_out, c.output_tokens * factor, footprint_tokens(n_in, c.output_tokens * factor))
            for p_in, n_in in prompts for p_out, factor in spread_points(getattr(c, "output_tokens_cv2", 0.0))]


def class_footprint_tokens(c: Class) -> float:
    """KV tokens a decoder holds for a request of ``c``, averaged over its time in the batch: its whole
    final context in whole blocks (the simulator's and the executor's admission rule), weighted by the
    time each output length stays — E[O·f] / E[O] over :func:`footprint_points`, which is the
    footprint of the mean request when the class has no spread. The occupancy's variance needs the
    second moment, not this one squared: :func:`class_kv_items` splits a class into its points."""
    points = footprint_points(c)
    if len(points) == 1:
        return points[0][2]
    held = sum(prob * out for prob, out, _ in points)
    return sum(prob * out * f for prob, out, f in points) / held


def class_kv_weight(headroom: KvHeadroom, c: Class) -> float:
    """What one held request of ``c`` counts for on a decode instance's KV row: the row's weight
    (:meth:`~placer.kv_admission.KvHeadroom.weight`, quadratic in the footprint, so E[O·f²]/E[O] where the
    class spreads: the second moment the occupancy's variance takes) averaged over the class's time in
    the batch (:func:`footprint_points`)."""
    points = footprint_points(c)
    held = sum(prob * out for prob, out, _ in points)
    return sum(prob * out * headroom.weight(f) for prob, out, f in points) / held


def class_kv_items(c: Class, arrivals: float, held: float, by_output: bool = True) -> list[tuple[float, float, int]]:
    """(arrival weight, time weight, footprint) of each point of ``c`` for the KV laws, the class's
    ``arrivals`` and ``held`` weights split over its :func:`footprint_points`: each point a Poisson
    stream of its own, so the laws' Σ L·f² is the class's time-weighted second moment E[O·f²]/E[O]
    (a compound Poisson's variance), an arrival brings its own footprint, and a point's stay is its own
    output's (not ``by_output``: a hold that does not depend on it, RLD's relay). The MILP's row
    (:func:`decode_kv_headroom`) and the evaluation's waiting law (:meth:`placer.decode_state.DecodeState.kv_load`)
    take the same items."""
    points = footprint_points(c)
    mean_held = sum(prob * out for prob, out, _ in points) if by_output else 1.0
    return [(arrivals * prob, held * prob * (out if by_output else 1.0) / mean_held, f) for prob, out, f in points]


def decode_fixed_share(im: InstanceModel, batch: float, context_tokens: float) -> float:
    """φ of a decode instance ``im`` at ``batch`` requests of ``context_tokens`` mean context: the share
    of its step the batch does not pay for (:func:`placer.kv_admission.fixed_step_share`), which sets
    how over-dispersed the requests it holds are (:func:`placer.kv_admission.kv_occupancy_variance`)."""
    batch = max(batch, 1.0)
    return fixed_step_share(im.step_s(batch, context_tokens), im.step_s(batch + 1.0, context_tokens), batch)


def decode_kv_headroom(problem: Problem, im: InstanceModel, over_dispersed: bool = False) -> KvHeadroom:
    """The linear KV row of one decode instance ``im`` (:class:`~placer.kv_admission.KvHeadroom`),
    tangent where the scenario's mix fills it: each class (each point of its output spread) weighted by
    its time in the batch. By default the M/G/∞ (Poisson) occupancy; ``over_dispersed``: the law the
    evaluation and the simulator live where a request's stay is its steps (MD, D), negative binomial
    (:func:`placer.kv_admission.kv_occupancy_variance`) with φ at the batch where the row binds,
    L = :func:`~placer.kv_admission.kv_design_batch` at φ(L) (:func:`decode_fixed_share`; φ falls as L
    grows, so one root) — there the row is the evaluation's quantile. RLD holds a relayed request for
    its line's transfer whatever its own step, so its row keeps the default. (The MILP's pools take the
    default until its data passes ``over_dispersed`` for MD and D pools: with it on every role the
    relay test cases have no plan.)"""
    items = [item for c in problem.classes for item in class_kv_items(c, c.share, c.share * c.output_tokens)]
    ctx, capacity = decode_context_tokens(problem.classes), im.kv_capacity_tokens
    if not over_dispersed:
        return KvHeadroom.for_mix(capacity, items)

    def held_at(batch: float) -> float:  # the KV's batch at the quantile when the decoder holds ``batch``
        return kv_design_batch(capacity, items, fixed_share=decode_fixed_share(im, batch, ctx))

    lo, hi = 1.0, kv_design_batch(capacity, items)  # the M/G/∞ quantile: the largest
    if held_at(hi) >= hi:
        lo = hi
    while hi - lo > 0.25 and held_at(lo) >= lo:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if held_at(mid) >= mid else (lo, mid)
    return KvHeadroom.for_mix(capacity, items, fixed_share=decode_fixed_share(im, max(lo, 1.0), ctx), where_binds=True)


def decode_design_for(problem: Problem, im: InstanceModel, load: Iterable[tuple[Class, float]]) -> tuple[int, float]:
    """(design batch, its step seconds) of a decode instance ``im`` that serves ``load``: (class,
    requests held at once, or any weight proportional to it: λ_k·T_k) — the largest batch meeting
    the TPOT SLA at the served classes' context (and the engine's batch cap) and holding their
    reserved KV at the occupancy quantile (:func:`placer.kv_admission.kv_design_batch`: the batch
    is a sum of random footprints, so it stops short of K / mean footprint). 0 when one step of
    one request misses TPOT, or when the KV holds less than one request of them at the quantile
    (a decoder still admits a request alone, but such a pool is not worth planning).

    The KV's part is the M/G/∞ (Poisson) quantile, not the over-dispersed law the KV row and the
    evaluation use (:func:`decode_kv_headroom`): the slot row (C6) caps the mean batch at
    ``utilization_cap`` × this batch, a margin that with the over-dispersed quantile would count the
    KV's fluctuation twice (the KV row holds it exactly). Planned at the over-dispersed quantile × 0.8,
    the test scenario ``micro`` has no plan at 6 req/s, though its plan there lives at 1.4 % of
    arrivals waiting for KV in the simulator (batch variance 2.45× its mean; the law says 2.44×)."""
    pairs = [(c, w) for c, w in load if w > 0]
    if not pairs:
        return 0, 0.0
    total = sum(w for _, w in pairs)
    ctx = sum(w * (c.input_tokens + c.output_tokens / 2) for c, w in pairs) / total
    # with the executor's runtime a step also sends each sequence its Tokens message (the same charge as
    # decode_state's batch law and the simulator's: placer.executor_costs.stream_step_s)
    stream = stream_step_s(problem.runtime)
    step = lambda b: im.step_s(b, ctx) + b * stream  # noqa: E731
    by_tpot = im.max_batch(ctx, problem.tpot_s, resident_tokens=1.0)  # memory: the quantile below
    while by_tpot >= 1 and stream > 0 and step(by_tpot) / getattr(im, "mtp_accept", 1.0) > problem.tpot_s:
        by_tpot -= 1
    if by_tpot < 1:
        return 0, step(1)
    # arrivals: held / time held, the time ∝ output at one step
    by_kv = kv_design_batch(im.kv_capacity_tokens, [item for c, w in pairs
                                                    for item in class_kv_items(c, w / max(c.output_tokens, 1), w)])
    if by_kv < 1:  # not one request of these classes at the quantile: no pool worth planning
        return 0, step(1)
    batch = min(by_tpot, int(by_kv))
    return batch, step(batch)


def decode_design(problem: Problem, im: InstanceModel) -> tuple[int, float]:
    """(design batch B, step seconds at B) of a decode instance at the scenario's mix
    (:func:`decode_design_for`, each class weighted by share × output: its time in the batch);
    B = 0: not even one request meets TPOT. The MILP's slot row (C6) uses it; its KV row (C7)
    counts each class's own reserved footprint, so a pool the plan gives long-context classes
    holds fewer requests than B (:func:`decode_kv_headroom`). (C6) caps the mean batch at
    ``utilization_cap`` × B even where B is the KV's: near the quantile the requests that wait do so
    behind a long one's reservation (FIFO), and the line grows fast — planned at B itself, the
    issue's user scenario kept a mean of 8.6 requests waiting and a simulated P90 of 5.6 s
    against 1.35 s planned."""
    return decode_design_for(problem, im, [(c, c.share * c.output_tokens) for c in problem.classes])


def slowest_rdma_peer(models: Iterable[InstanceModel]) -> InstanceModel | None:
    """The receiving instance model with the least RDMA bandwidth (None without any): where a
    flow's decoder is one of several pools, its RDMA time is priced at the slowest (conservative)."""
    return min(models, key=lambda m: m.rdma_bytes_per_s, default=None)


def ttft_det_s(prefill_s: float, kv_move_s: float) -> float:
    """TTFT without queueing, as the executor streams it: prefill + the KV's move to the
    decoder that streams t0 (:data:`FIRST_TOKEN_STREAMER`, :meth:`Route.first_kv_s`). No decode
    step is added — that decoder streams t0 on import. The P queue's wait comes on top,
    and in the simulator also any wait for KV room at that decoder (admission)."""
    return prefill_s + kv_move_s


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    """One flow's path and what it runs on, to ask its physics: a request of class ``cls`` on
    ``pipeline`` from its P in ``src`` to its decoder in ``dst``, with the scenario's decode-side
    cache setting ``drc`` (plain PD, P-D, never has one), prefilled on the P instance model ``im``
    and copied by RDMA to the receiving instance ``peer`` (None: P's own NIC prices the copy).

    ``im`` is needed only by the KV and TTFT timings (:meth:`first_kv_s`, :meth:`staged_kv_s`,
    :meth:`first_token_law`); WAN bytes and seconds need the class and the line alone. Not a
    plan's route row (:class:`placer.plan.Route`, which carries req/s): this is the physics of one."""

    problem: Problem
    cls: Class
    pipeline: str
    src: str
    dst: str
    drc: bool
    im: InstanceModel | None = None
    peer: InstanceModel | None = None
    #: (mean batch, step s) of the decoder that streams t0, where settled (`evaluate`): the executor's first
    #: token follows its Tokens messages back (:meth:`executor_s`); None: its own message alone (the MILP)
    decoder: tuple[float, float] | None = None

    def wan_bytes(self) -> float:
        """KV bytes of one request that cross the WAN: with the decode-side radix cache only what the decoders
        at ``dst`` lack, (1 − hit)·input (hit: :meth:`Problem.decode_hit`); without it (or on P-D) the whole prompt."""
        c = self.cls
        hit = self.problem.decode_hit(c, self.dst) if self.drc and self.pipeline != P_D else 0.0
        return (1.0 - hit) * c.input_tokens * self.problem.kv_bytes_per_token

    def wan_s(self, utilization: float) -> float:
        """Seconds of the request's KV transfer over the line src→dst at ``utilization`` (inf without one)."""
        link = self.problem.links.get((self.src, self.dst))
        if link is None:
            return math.inf
        return wan_transfer_s(self.wan_bytes(), link.bytes_per_s, link.rtt_s, utilization)

    def first_kv_s(self, utilization: float) -> float:
        """Seconds until the decoder of the first token holds the KV it needs: the whole prompt by
        RDMA to RLD on relay pipelines; otherwise the (DRC-trimmed) KV to the decoder, over the
        WAN (at ``utilization``) when it is remote and by RDMA when it is local. An RDMA copy runs
        at the slower NIC side of P and ``peer``."""
        if self.pipeline in RELAY_PIPELINES:
            return self.im.rdma_s(self.cls.input_tokens * self.problem.kv_bytes_per_token, self.peer)
        if self.src != self.dst:
            return self.wan_s(utilization)
        return self.im.rdma_s(self.wan_bytes(), self.peer)

    def executor_s(self, prefill_s: float, utilization: float = 0.0) -> float:
        """Expected seconds the executor's measured runtime (``problem.runtime``; 0 without one) adds to the
        first token over this route's idealised KV move (:func:`placer.executor_costs.first_token_added_s`:
        the path overhead, the export and import of what the first decoder imports; across the line the pull's
        round trip, the frames' in-order release, the socket path and the first token's way back). Inside a
        datacenter that export and import are the move: the route's RDMA copy is taken off. ``utilization``: the
        line's, where the router's order waits its turn among the transfers."""
        rt = getattr(self.problem, "runtime", None)
        if rt is None:
            return 0.0
        relayed = FIRST_TOKEN_STREAMER[self.pipeline] == RLD
        kv = self.cls.input_tokens * self.problem.kv_bytes_per_token if relayed else self.wan_bytes()
        if relayed or self.src == self.dst:
            return first_token_added_s(rt, prefill_s, kv, None, self.decoder) - self.first_kv_s(0.0)
        link = self.problem.links.get((self.src, self.dst))
        if link is None:
            return 0.0
        return first_token_added_s(rt, prefill_s, kv, (link.rtt_s, link.jitter_ms / 1000, link.bytes_per_s),
                                   self.decoder, utilization)

    def staged_kv_s(self, utilization: float) -> float:
        """Seconds P keeps the request's KV staged after prefill: until every transfer it feeds is done
        (on P-RLD-MD the WAN delta to MD outlasts the RDMA copy to RLD)."""
        first = self.first_kv_s(utilization)
        if self.pipeline == P_RLD_MD:
            return max(first, self.wan_s(utilization))
        return first

    def first_token_law(self, wait: WaitModel, utilization: float | LineLoad, line_share: float = 0.0,
                        line_residual_s: float | None = None, packed: bool = False) -> tuple[float, TtftTail]:
        """(deterministic TTFT, random tail) of the flow: prefill + the KV's move to the first decoder
        (:func:`ttft_det_s`), its WAN part taken unloaded, and the tail: the P queue's ``wait`` plus
        the line's slowdown at ``utilization`` (:class:`TtftTail`).

        The slowdown counts the transfers that start with this one (:func:`line_batchmates`, m of
        them, ``line_share`` of the queue's requests crossing this line; only a prompt shorter than
        a chunk shares a forward, so a longer one has none). Under processor sharing a transfer of
        b seconds at full rate is slowed by the transfers it finds, ρ/(1 − ρ) on average (the
        M/G/1-PS mean b/(1 − ρ)), and by its batch-mates, which do not queue ahead of it but start
        with it: a batch-mate at least as large (a smaller one is counted at b too) takes an equal
        share of the line while the tagged one runs, b more each. So the excess over the unloaded b
        is b·(ρ/(1 − ρ) + m) on average — exact for a small transfer finding the Poisson count of
        others; batches make the line burstier, so it finds a few more (on the simulator's line with
        geometric batches of mean 1.34 mates at ρ 0.5 and 0.8, tests/placer/test_wait_tail.py, a
        small transfer's excess is 10–30 % above this; counting each mate as load on top of ρ,
        b(1 + m)/(1 − ρ) − b, would put the law 35–80 % above it).
        Mean TTFT = det + E[W] + that excess. Its variance is the M/G/1-PS sojourn's at size
        (1 + m)·b (:func:`~placer.ttft_tail.ps_sojourn_var_s2`) given ``line_residual_s``, the line's
        mean residual transfer E[S²]/(2E[S]) in seconds at full rate; without it (the MILP: the
        line's mix is what it decides) the excess is exponential. Where the evaluation knows what feeds
        the line (``utilization`` a :class:`~placer.ttft_tail.LineLoad`), a mate counts E[min(b, b′)] (the
        smaller of the two, under processor sharing) and the variance is scaled by the line's regularity
        (:func:`~placer.ttft_tail.congestion_var_factor`).

        With ``packed`` (the prediction; the planning rule leaves it out) a prompt shorter than a
        chunk also finishes with its packed forward: the tail adds its forward-mates' time
        (:func:`~placer.ttft_tail.pack_extension`)."""
        c, im = self.cls, self.im
        load = utilization if isinstance(utilization, LineLoad) else LineLoad(utilization)
        utilization = load.utilization
        pre = im.prefill_s(c.input_tokens, c.hit_rate)
        loaded = self.first_kv_s(utilization)
        short = (1.0 - c.hit_rate) * c.input_tokens < im.prefill_chunk_tokens
        pack_mean, pack_var = pack_extension(wait) if packed and short else (0.0, 0.0)
        if FIRST_TOKEN_STREAMER[self.pipeline] == RLD or self.src == self.dst or not math.isfinite(loaded):
            det = ttft_det_s(pre, loaded) + self.executor_s(pre)
            return det, TtftTail(wait, pack_mean_s=pack_mean, pack_var_s2=pack_var)
        unloaded = self.first_kv_s(0.0)
        rtt = self.problem.links[(self.src, self.dst)].rtt_s
        mates = line_batchmates(wait, line_share) * load.mate_weight if short else 0.0
        size = unloaded - rtt
        var = None
        if line_residual_s is not None:
            var = ps_sojourn_var_s2(size * (1.0 + mates), utilization, line_residual_s) * congestion_var_factor(
                utilization, load.dispersion)
        excess = (loaded - rtt) - size + size * mates  # b·ρ/(1 − ρ) + b·m·E[min(b, b′)]/b
        det = ttft_det_s(pre, unloaded) + self.executor_s(pre, utilization)
        return det, TtftTail(wait, excess, var, pack_mean, pack_var)
