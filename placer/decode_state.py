"""The decode pools of a plan's analysis: what each instance carries and the batch it settles at
(split from :mod:`placer.evaluate`).

in:  a :class:`~placer.problem.Problem`, a :class:`~placer.plan.Plan` with ``assignments``, the
     lines' planned utilisation
out: :class:`DecodeState` per decode pool; :func:`_load_decode` (tokens/s, contexts and relay holds
     per instance), :func:`_hand_over` (MD decodes what RLD did not), :func:`_rld_tokens_per_s` (and each
     relay's eager tokens at its own context's step, :func:`_relay_eager`),
     :func:`_settle_batch` (the batch's stationary law, :func:`placer.batch_law.batch_law` stopped where the KV
     binds, on :func:`composed_step`: a
     step averaged over the batch's contexts; its step, the KV wait law, each class's),
     :meth:`DecodeState.tpot_late_share` (the share of requests whose own TPOT misses the SLA);
     :func:`_relay_hold_s`, :func:`_line_utilization`;
     re-exported from :mod:`placer.decode_sites`: :func:`site_tpot_late`, :func:`_meets_tpot`,
     :func:`class_kv_waits` (a site's pools as a class meets them)

:mod:`placer.evaluate` runs these in order and re-exports them; the flow physics is
:mod:`placer.flows`', the KV laws :mod:`placer.kv_admission`'s.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from placer.aggregated import AggDesign
from placer.batch_law import batch_law, kv_batch_cap
from placer.executor_costs import stream_step_s
from placer.flows import Route, class_kv_items, decode_design, eager_tokens, relay_stop_s
from placer.kv_admission import fixed_step_share, held_fixed_share
from placer.decode_sites import _meets_tpot, class_kv_waits, site_tpot_late
from placer.kv_class_wait import named_kv_waits
from placer.kv_wait import kv_wait_law
from placer.pdd import MD, P, P_RLD, P_RLD_MD, RLD
from placer.perfmodel import InstanceModel
from placer.plan import Assignment, Plan, PoolKey
from placer.problem import Class, Problem

__all__ = ["KV_WAIT_NOTE_SHARE", "DecodeState", "batch_law", "composed_step", "class_kv_waits", "site_tpot_late",
           "_meets_tpot"]  # the sites' half re-exported from placer.decode_sites

#: A decode pool whose arrivals wait for KV room more often than this gets a note (its plan was
#: made for 1 − placer.kv_admission.KV_OCCUPANCY_QUANTILE; a hand-written or older plan may not be).
KV_WAIT_NOTE_SHARE = 0.10


@dataclass
class DecodeState:
    count: int
    im: InstanceModel
    tokens_per_s: float = 0.0  # per instance
    context_weighted: float = 0.0
    context_sq_weighted: float = 0.0  # Σ tokens/s × E[context²] over the tokens: the contexts' spread
    held: float = 0.0  # RLD: relayed requests held at once per instance (req/s × hold s), any step
    held_context: float = 0.0  # their prompt tokens, weighted as ``held``
    batch: float = 0.0
    step_s: float = 0.0
    seen_step_s: float = 0.0  # the step a request in the batch sees on average (at B + 1)
    kv_items: list = field(default_factory=list)  # (req/s per instance, class, relay hold s or None)
    kv_wait: float = 0.0  # share of arrivals that wait for KV room, the line included (placer.kv_wait)
    kv_wait_s: float = 0.0  # ... and the mean seconds those wait
    class_kv_wait: dict = field(default_factory=dict)  # class -> (kv_wait, kv_wait_s) its own (placer.kv_class_wait)
    overloaded: bool = False
    agg: AggDesign | None = None  # A pools: the design (chunk) its steps carry; steps are mixed steps
    stream_s: float = 0.0  # per sequence per step: the executor's Tokens message (executor_costs.stream_step_s)
    relay_tokens_per_s: float = 0.0  # RLD: tokens its relayed requests get before the handoff (per instance)
    first_tokens_per_s: float = 0.0  # req/s per instance whose first token (t0) this pool streams
    relay_gaps_per_s: float = 0.0  # RLD: its relays' gaps (eager tokens less t0) per instance ...
    relay_gap_s: float = 0.0  # ... and their seconds per second, each at its own context's step (own_step_s)
    mean_in_batch: float = 0.0  # the batch law's mean number decoding, relay holds included (unclamped)
    context_mean: float = 0.0  # the batch's mean context (tokens) the law stepped at
    batch_probs: list = field(default_factory=list)  # the batch law (batch_law): P(n decoding), n = 0, 1, …
    context_spread: float = 0.0  # one sequence's context spread the law composed its steps with
    fixed_share: float = 1.0  # φ: the share of a step the batch does not pay for (kv_admission.fixed_step_share)

    @property
    def gaps_per_s(self) -> float:
        """Per instance, the gaps between two tokens of a request that fall in this pool's steps, each a step the
        request sees (TPOT = last − first token over output − 1): its tokens less the first ones it streams (a
        relayed request's t0 is RLD's; the handoff's pause is the gap before MD's first token, counted on MD)."""
        return max(self.tokens_per_s + self.relay_tokens_per_s - self.first_tokens_per_s, 0.0)

    @property
    def gap_seconds_per_s(self) -> float:
        """Per instance, the seconds of those gaps per second: the pool's seen step for its own tokens (Little),
        RLD's relays at their own contexts' steps."""
        own = max(self.gaps_per_s - self.relay_gaps_per_s, 0.0)
        return own * (self.seen_step_s or self.step_s) + self.relay_gap_s

    def own_step_s(self, context_tokens: float) -> float:
        """The step a request of ``context_tokens`` sees here: the batch it is in (itself and the law's mean
        others, :func:`_settle_batch`) steps at their mean context, so a short prompt beside long ones steps
        faster than the pool's mean (a step grows with its context: the bench's CPU table 3.2 ms at 400 tokens,
        11.8 at 1,800) — the pool's seen step scaled by the table's step at that mix over its step at the mean.
        pdd's bench RLD (mean context 1,560): a 368-token relay 5 ms a token, not the pool's 12.5; the simulator's
        RLD made 40 tokens in its 0.19 s where the pool's step gave 16."""
        seen = self.seen_step_s or self.step_s
        if self.context_mean <= 0 or self.agg is not None:
            return seen
        b = self.mean_in_batch + 1.0
        base = self.step_at(b, self.context_mean)
        mix = (context_tokens + (b - 1.0) * self.context_mean) / b
        return seen * self.step_at(b, mix) / base if base > 0 else seen

    def tpot_late_share(self, output_tokens: float, tpot_s: float) -> float:
        """The share of this pool's requests of ``output_tokens`` whose own TPOT — the mean of the steps of the
        batches they decode in — exceeds ``tpot_s`` (a pool past it on average: :func:`_meets_tpot`). Each step a
        request sees is its batch's with it, B + 1, B of the batch law (PASTA, a token's too). A short request sees
        one level of the batch; a long one its mean over its stay: the batch forgets on the time scale of its
        requests' stays, so the stay-average of B spreads by √g about the mean (g: :func:`_averaged_share`). Each
        level n of the law moves to B̄ + (n − B̄)·√g: the law's own shape at g = 1, its mean for a stay of many
        memories. The simulator's share over the TPOT SLA (issue 42's goodput errors): rnd-7-22 0.21 (0.20
        simulated), rnd-7-20 0.10 (0.09), rnd-7-5 0.07 (0.10: its short requests see a fuller batch)."""
        probs = self.batch_probs
        if not probs or output_tokens < 2 or self.agg is not None or self.overloaded:
            return 0.0
        mean = sum(n * p for n, p in enumerate(probs))
        shrink = math.sqrt(_averaged_share(self, (output_tokens - 1.0) * (self.seen_step_s or self.step_s)))
        late = 0.0
        for n in range(len(probs) - 1, -1, -1):  # the step grows with the batch: the late levels are the top ones
            b = mean + (n - mean) * shrink + 1.0 + self.held
            if composed_step(self.step_at, b, self.context_mean, self.context_spread) <= tpot_s:
                break
            late += probs[n]
        return min(late, 1.0)

    def kv_load(self, by_class: bool = False) -> list:
        """The KV-wait law's load: (λ, L, f) per point of each class's prompt and output spreads
        (:func:`placer.flows.class_kv_items`, the MILP's KV row's items), the class's L_k = λ_k × output × the
        step a token sees or × its relay hold (the same for each point): the occupancy's variance Σ L·f² its
        second moment, not its mean squared. ``by_class``: (class name, its points' rows) per :attr:`kv_items`."""
        named = [(c.name, class_kv_items(c, rate, rate * c.output_tokens * self.seen_step_s) if hold is None else
                  class_kv_items(c, rate, rate * hold, by_output=False)) for rate, c, hold in self.kv_items]
        return named if by_class else [item for _, items in named for item in items]

    @property
    def busy(self) -> bool:
        """Whether the plan sends this pool any decode work (tokens to the end, or relay holds)."""
        return self.tokens_per_s > 0 or self.held > 0

    def step_at(self, batch: float, context_tokens: float) -> float:
        """Seconds of one step at ``batch``: a decode step (with the executor's runtime, each sequence's Tokens
        message after it: ``stream_s``, as the simulator's decoder charges it), or (A) a mixed step with a full
        chunk."""
        if self.agg is None:
            return self.im.step_s(batch, context_tokens) + max(batch, 1.0) * self.stream_s
        return self.im.mixed_step_s(batch, context_tokens, self.agg.chunk_tokens, self.agg.chunk_start_tokens)


def _ignored(a: Assignment) -> str:
    return (f"ignored {a.rps:.2g} req/s of {a.request_class} assigned to {_label(a.key)}, "
            "which has no instances")


def _line_utilization(link_util: dict[tuple[str, str], float], src: str, dst: str) -> float:
    """The utilisation a transfer over src→dst sees (kept below 1 so it stays finite)."""
    return min(link_util.get((src, dst), 0.0), 0.999)


def _relay_hold_s(problem: Problem, plan: Plan, a: Assignment, c: Class, link_util: dict, im: InstanceModel) -> float:
    """Seconds RLD holds one request of the P-RLD-MD assignment ``a``: its KV's WAN transfer at the
    line's planned utilisation, then the handoff until RLD sends the final batch
    (:func:`placer.flows.relay_stop_s`; RLD's own step only decides catch-up or one-shot) — or, where
    RLD decodes the whole output first (one token a design step), until then: the request ends on RLD
    and leaves it, its KV still crossing (the simulator's and the executor's rule). rnd-7-13's relays of
    17-43-token outputs over lines planned at 85 %: RLD held them for the transfer, batch 12.4 of 13 and
    a 10.4-s KV wait planned, where the simulator's RLD held 0.8 and none waited. The hold is a whole number
    of design steps, :func:`placer.flows.eager_tokens` × the step, as the MILP's relay rows charge it
    (:func:`placer.ilp.decode_rows._split_relay`): at most one step more than the transfer and handoff."""
    src, dst = a.datacenter, a.dst or a.datacenter
    wan = Route(problem, c, P_RLD_MD, src, dst, problem.options.drc).wan_s(_line_utilization(link_util, src, dst))
    link = problem.links.get((src, dst))
    rtt = link.rtt_s if link is not None else 0.0
    step = decode_design(problem, im)[1]
    stop = relay_stop_s(wan, rtt, step, plan.handoff.mode, plan.handoff.catch_up_threshold_tokens)
    return eager_tokens(stop, c.output_tokens, step) * step if step > 0 else stop  # the MILP's busy (_split_relay)


def _load_decode(problem: Problem, plan: Plan, classes: dict[str, Class], decode: dict[PoolKey, DecodeState],
                 link_util: dict, notes: list[str]) -> list[tuple[float, float, int, PoolKey, str]]:
    """Add every decode assignment's load to its pool: tokens/s and context of the requests that
    decode to the end there; for P-RLD-MD on RLD the request-seconds it holds them (its relay holds
    last the WAN transfer and the handoff whatever RLD's step). Returns the relay holds, (req/s,
    hold seconds, output tokens, pool, class, MD's datacenter), whose tokens :func:`_rld_tokens_per_s` counts at
    the step RLD settles at."""
    relays = []
    stream = stream_step_s(problem.runtime)
    for st in decode.values():  # the decoders' steps with the executor's runtime (flows.decode_design_for's)
        st.stream_s = stream if st.agg is None else 0.0
    for a in plan.assignments:
        if a.role == P or a.rps <= 0:
            continue
        if a.key not in decode:  # solver noise on a pool that got no instances
            notes.append(_ignored(a))
            continue
        c, st = classes[a.request_class], decode[a.key]
        if a.role == RLD and a.pipeline != P_RLD:
            hold = _relay_hold_s(problem, plan, a, c, link_util, st.im)
            if math.isfinite(hold):
                relays.append((a.rps, hold, c.output_tokens, a.key, c.name, a.dst or a.datacenter))
                st.kv_items.append((a.rps / st.count, c, hold))
                held = a.rps * hold / st.count
                st.held += held
                st.held_context += held * c.input_tokens
                continue
        rate = a.rps * c.output_tokens / st.count
        st.first_tokens_per_s += a.rps / st.count  # a relayed share of an MD row gives its t0 back (_hand_over)
        st.kv_items.append((a.rps / st.count, c, None))
        st.tokens_per_s += rate
        st.context_weighted += rate * (c.input_tokens + c.output_tokens / 2)
        st.context_sq_weighted += rate * _context_sq(c.input_tokens, c.output_tokens)
    return relays


def _context_sq(start: float, tokens: float) -> float:
    """E[context²] over the tokens a request decodes from ``start`` on: its context runs from start to
    start + tokens (uniform), so the midpoint² + tokens² / 12."""
    return (start + tokens / 2) ** 2 + tokens ** 2 / 12


def _hand_over(problem: Problem, plan: Plan, classes: dict[str, Class], decode: dict[PoolKey, DecodeState],
               relays: list[tuple[float, float, int, PoolKey, str, str]]) -> None:
    """MD decodes what RLD did not: a P-RLD-MD request's output less the tokens RLD streamed before the
    handoff (:func:`placer.flows.eager_tokens` at the step its own context sees on RLD, :func:`_relay_eager`;
    RLD's pools settle first), which MD's one extend-decode pass takes in, so MD's tokens/s and its batch carry
    output − eager, over contexts from input + eager on (the simulator's MD joins the request with what is
    left). Before this, MD was charged the whole output: the bench's pdd MD 60 tokens/s where it decoded 48
    (RLD made 20 %). A relay hands over in its destination only: MD's rows carry no pipeline (a class's direct
    and relayed requests in one row), so the relayed share of a class's MD rows in a datacenter is the req/s
    its RLD relays send there over them. Before, every MD row of the class took the share of all its relays:
    rnd-7-21's MD dc3 B200 (no relay lands there) was charged 3,639 tokens/s of its 3,733 and planned at batch
    84.5 with 15.5 % of arrivals waiting for KV; alone with its own load the simulator's decoder holds 99."""
    eager: dict[tuple[str, str], list[float]] = {}  # (class, MD's dc) → [req/s, req/s × eager tokens]
    # each relay's own class (two classes of one output length have their own holds: before, a relay was matched
    # to every class of its output length, so pdd's bench classes new and new-long — 320 tokens each — both got
    # their mean eager tokens, 59, where RLD made 23 and 95: MD was charged the long prompts' tokens at 1,179
    # tokens of context where the simulator's MD decoded at 1,059)
    for rps, hold, output, key, name, dst in relays:
        e = eager.setdefault((name, dst), [0.0, 0.0])
        e[0] += rps
        e[1] += rps * _relay_eager(problem, decode[key], classes[name], hold, output)[0]
    md_rps: dict[tuple[str, str], float] = defaultdict(float)
    for a in plan.assignments:
        if a.role == MD and a.pipeline in (None, P_RLD_MD) and a.rps > 0 and a.key in decode:
            md_rps[(a.request_class, a.key.datacenter)] += a.rps
    for a in plan.assignments:
        site = (a.request_class, a.key.datacenter)
        if a.role != MD or a.pipeline not in (None, P_RLD_MD) or a.rps <= 0 or a.key not in decode \
                or site not in eager:
            continue
        c, st = classes[a.request_class], decode[a.key]
        rps, tokens = eager[site]
        made = min(tokens / rps, c.output_tokens - 1.0)  # MD predicts at least the token after the handoff
        rate = a.rps / st.count * min(1.0, rps / md_rps[site])
        st.tokens_per_s -= rate * made
        st.first_tokens_per_s -= rate  # RLD streamed its t0
        st.context_weighted += rate * ((c.output_tokens - made) * (c.input_tokens + (made + c.output_tokens) / 2)
                                       - c.output_tokens * (c.input_tokens + c.output_tokens / 2))
        st.context_sq_weighted += rate * ((c.output_tokens - made) * _context_sq(c.input_tokens + made,
                                                                                 c.output_tokens - made)
                                          - c.output_tokens * _context_sq(c.input_tokens, c.output_tokens))


def _rld_tokens_per_s(problem: Problem, plan: Plan, classes: dict[str, Class], decode: dict[PoolKey, DecodeState],
                      relays: list[tuple[float, float, int, PoolKey, str, str]]) -> float:
    """RLD's tokens/s: P-RLD requests decode all their output there; a relayed one a token per step
    of the batch RLD settles at (Little's law, :func:`_settle_batch`) while RLD holds it (at least
    t0, at most its output: :func:`placer.flows.eager_tokens`) — the step the request sees, the batch
    with it in (:func:`_settle_batch`). Each RLD pool keeps its relays' share (``relay_tokens_per_s``, and their t0
    in ``first_tokens_per_s``) for the TPOT mean."""
    total = sum(a.rps * classes[a.request_class].output_tokens for a in plan.assignments
                if a.role == RLD and a.pipeline == P_RLD and a.rps > 0 and a.key in decode)
    for rps, hold, output, key, name, _ in relays:
        st = decode[key]
        tokens, step = _relay_eager(problem, st, classes[name], hold, output)
        total += rps * tokens
        st.relay_tokens_per_s += rps * tokens / st.count
        st.first_tokens_per_s += rps / st.count
        st.relay_gaps_per_s += rps * (tokens - 1.0) / st.count
        st.relay_gap_s += rps * (tokens - 1.0) * step / st.count
    return total


def _relay_eager(problem: Problem, st: DecodeState, c: Class, hold: float, output: int) -> tuple[float, float]:
    """(tokens RLD streams a relayed request of ``c`` while it holds it ``hold`` s, the step they take): one per
    step its own batch takes (:meth:`DecodeState.own_step_s` at its context, prompt + half of them; the design
    step before RLD has settled)."""
    if st.seen_step_s <= 0:
        step = decode_design(problem, st.im)[1]
        return eager_tokens(hold, output, step), step
    step = st.own_step_s(c.input_tokens + eager_tokens(hold, output, st.seen_step_s) / 2)
    return eager_tokens(hold, output, step), step


def _context_spread(st: DecodeState, mean: float) -> float:
    """The standard deviation of one decoding sequence's context over the tokens the pool decodes (the classes'
    contexts and each request's growth; RLD's relay holds not counted: their context is not tracked apart)."""
    if st.tokens_per_s <= 0:
        return 0.0
    own = st.context_weighted / st.tokens_per_s
    var = st.context_sq_weighted / st.tokens_per_s - own * own
    return math.sqrt(max(var, 0.0)) if mean > 0 else 0.0


def composed_step(step_at, n: float, mean: float, spread: float) -> float:
    """A step of ``n`` sequences averaged over which sequences they are: a batch's mean context has the
    sequences' spread ÷ √n about the pool's mean, and a step is not linear in its context (the bench's CPU table
    at batch 2: 7.7 ms at 300 tokens, 19.5 at 800, 36.0 at 2,000), so the step at the mean context is not the
    mean step. Two points, mean ± spread / √n (exact to the second order; a batch of one mixing pdd's MD
    contexts 523 and 1,804 is those two points). ``spread`` 0: the step at the mean."""
    if spread <= 0:
        return step_at(n, mean)
    d = min(spread / math.sqrt(max(n, 1.0)), mean - 1.0)
    return (step_at(n, mean - d) + step_at(n, mean + d)) / 2


def _settle_batch(problem: Problem, key: PoolKey, st: DecodeState, notes: list[str]) -> None:
    """The decode batch and the step a request sees, from the batch's stationary law (:func:`batch_law`): B, the
    mean number of requests decoding (+ the relay holds: request-seconds per second RLD holds relayed
    requests), and by Little's law a token's mean time, B / tokens/s (``seen_step_s``: the step a request
    sees, itself in the batch). A step linear in the batch gives B = ρ / (1 − ρ) and c / (1 − ρ), the M/G/1
    processor-sharing figures. The mean of the steps, not the step at the mean batch: B = tokens/s ×
    step(B + 1) read the table once, at B + 1, and on the bench's CPU table (step(1) 7.1 ms, step(2) 17.4 ms,
    step(4) 20 ms) a decoder at 57.6 tokens/s came out at 17.4 ms a token where a decoder stepping through
    that table makes one every 11.7 ms (this law: 11.9; tests/placer/test_decode_batch_law.py). ``step_s`` stays
    the step at the batch (at least 1) for the TPOT SLA and φ; the KV-wait law holds the batch law's requests.
    The law stops where the KV binds (:func:`placer.batch_law.kv_batch_cap`, at the mix the pool holds): a decoder
    holds no more than its KV and its line waits without slowing the steps (rnd-7-21's MD dc1 MI300X tp4: 107.8
    free, 104.4 so, the simulator's decoder alone 104.6-105.2)."""
    ctx = (st.context_weighted + st.held_context) / (st.tokens_per_s + st.held) if st.held else (
        st.context_weighted / st.tokens_per_s)
    cap = int(st.im.batch_cap)
    spread = _context_spread(st, ctx)
    kv_cap = None
    for _ in range(4):  # the KV's count cap from the held mix, which the relays' holds move with the step
        probs, st.overloaded = batch_law(st.tokens_per_s, lambda n: composed_step(st.step_at, n, ctx, spread), cap,
                                         st.held, kv_cap)
        _take_law(st, probs, ctx, spread, cap)
        was, kv_cap = kv_cap, None if st.overloaded else kv_batch_cap(st.im.kv_capacity_tokens, st.kv_load(), st.held)
        if kv_cap is None or (was is not None and abs(kv_cap - was) < 0.01):
            break
    # the waiting law: no KV room or a line waiting
    phi = fixed_step_share(st.step_s, st.step_at(st.batch + 1.0, ctx), st.batch)
    named = st.kv_load(by_class=True)
    st.kv_wait, st.kv_wait_s = kv_wait_law(st.im.kv_capacity_tokens, [row for _, rows in named for row in rows], phi)
    st.class_kv_wait = named_kv_waits(st.im.kv_capacity_tokens, named, phi)  # each class's own
    st.fixed_share = phi
    if st.kv_wait > KV_WAIT_NOTE_SHARE:
        notes.append(f"decode pool {_label(key)}: {st.kv_wait:.0%} of its arrivals wait for KV room (each reserves "
                     f"its prompt + output), {st.kv_wait_s:.2f} s on average; the simulator queues them there")
    if st.overloaded or st.step_s > problem.tpot_s * 1.0001:
        notes.append(f"decode pool {_label(key)}: step {st.step_s:.4f} s at batch "
                     f"{st.batch:.0f} exceeds TPOT {problem.tpot_s} s")


def _take_law(st: DecodeState, probs: list, ctx: float, spread: float, cap: int) -> None:
    """The batch, its step and the step a token sees from the batch law ``probs`` (:func:`_settle_batch`)."""
    batch = float(cap) if st.overloaded else sum(n * p for n, p in enumerate(probs)) + st.held
    st.batch = max(batch, 1.0)
    st.mean_in_batch, st.context_mean = batch, ctx
    st.batch_probs, st.context_spread = ([] if st.overloaded else probs), spread
    st.step_s = st.step_at(st.batch, ctx)
    # what one token takes on average (Little: the requests decoding ÷ their tokens/s); RLD's relays alone
    # (no tokens to the end): the step with one more beside the ones it holds
    decoding = batch - st.held
    st.seen_step_s = decoding / st.tokens_per_s if st.tokens_per_s > 0 and not st.overloaded else \
        composed_step(st.step_at, min(batch + 1.0, float(cap)), ctx, spread)


def _averaged_share(st: DecodeState, window_s: float) -> float:
    """g: the share of the batch's variance left in its mean over ``window_s``. Each class's count is M/G/∞ (its
    share of the variance L_k / L), and forgets over its stay S_k (output × the seen step, or a relay's hold): a
    triangle correlation, 1 − W/3S for W ≤ S, S/W − S²/3W² beyond. A step that grows with the batch slows every
    held request when more are held, so a deviation relaxes at φ of that rate (the count's variance is the
    Poisson one over φ, :func:`placer.kv_admission.kv_occupancy_variance`): each S_k taken over φ."""
    stays = [(r, h if h is not None else c.output_tokens * (st.seen_step_s or st.step_s)) for r, c, h in st.kv_items]
    held, share = sum(r * s for r, s in stays), 0.0
    for r, s in stays:
        u = window_s * held_fixed_share(st.fixed_share) / s if s > 0 else math.inf
        share += r * s * (1.0 - u / 3.0 if u <= 1.0 else 1.0 / u - 1.0 / (3.0 * u * u))
    return share / held if held > 0 and window_s > 0 else 1.0


def _label(key: PoolKey) -> str:
    return f"{key.role} {key.datacenter} {key.chip} tp{key.tp}"
