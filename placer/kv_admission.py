"""How a decoder admits a request by its KV: the one rule the planner, the simulator and the executor share.

in:  nothing of the project (the standard library only: tests/test_layers.py checks it)
out: :func:`footprint_tokens` (what a request reserves), :func:`admits` (the admission test),
     :func:`admit_order` (who of a waiting line is admitted: FIFO with EASY backfilling),
     :class:`KvGate` (a decoder's reservations and waiting line by that order: the executor's
     MD and RLD admit imported KV through it),
     :func:`occupancy_quantile_z` and :class:`KvHeadroom` (how much of a decoder's KV a plan may
     fill on average so that few arrivals find it full), :func:`kv_design_batch` (the mean batch
     a decoder's KV carries for the classes it serves), :func:`kv_wait_probability` (the share
     of arrivals that find no KV room for their own reservation at a given load; negative binomial
     where a step grows with the batch: :func:`kv_occupancy_variance`, the step's fixed share
     :func:`fixed_step_share`). How long arrivals wait, the line in front included: :mod:`placer.kv_wait`.

The rule (reserve-on-admit, SGLang's way with its new-token ratio at 1): a decoder admits a
request when its batch has a slot and its free KV holds the request's whole final context —
prompt plus output budget, rounded up to whole blocks — and keeps that reservation until the
request leaves (finished, or handed off). Requests that do not fit wait in arrival order; a request
alone is always admitted (a decoder never deadlocks on one request larger than its memory). The
line is FIFO with EASY backfilling (Lifka's scheduler for parallel jobs, :func:`admit_order`): the
batch steps in lockstep, so a request admitted at step a that emits n tokens here has left by step
a + n; the head's *shadow* is the step by which enough held requests have left for it to fit, and a
request that fits now may pass the head if it leaves by the shadow, or fits beside the head then.
The head is never admitted later than strict FIFO would admit it (no starvation, no bound to
tune), and a small request no longer waits behind a giant one for room it could have used and
given back (head-of-line blocking; the evaluation's waiting law, :mod:`placer.kv_wait`, prices the
line an arrival joins, the headroom row below only the room its own footprint needs). SGLang's decode prealloc queue and vLLM's
waiting queue both stop at the first request that does not fit (strict FIFO). vLLM instead
allocates blocks as tokens come and preempts the newest request when they run out (recomputing
or swapping it later); that fills memory better on average but makes the batch a request runs
in, and its TTFT, depend on preemptions the plan cannot price. Reserving the final context is
what the simulator (:mod:`placer.sim.decode`) and the executor's decoders (MD and RLD import
KV through this test) do, and what the planner's KV row counts:

* A request holds ``footprint_tokens(I, O)`` from admission to departure: KV-token-seconds
  f_k · T_k, T_k its time on the decoder (O·step, or RLD's relay hold). Little's law: a pool's
  mean reserved KV is Σ_k λ_k · T_k · f_k per instance.
* Occupancy is random: were a step's length independent of the batch, the requests on an
  instance would be (far from its batch cap) an M/G/∞ population, Poisson in number, their KV
  compound Poisson: mean M = Σ L_k f_k, variance Σ L_k f_k² (L_k = λ_k T_k). A decode step grows
  with the batch, step(n) = a + c·n, so when more are held each stays longer: the number held is
  negative binomial, and the KV's variance is V = Σ L_k f_k² + M²·(1 − φ)/(φ·B) (B = Σ L_k,
  φ = a / step(B) the step's fixed share: :func:`kv_occupancy_variance`, the evaluation's waiting law
  and, with ``over_dispersed``, :func:`placer.flows.decode_kv_headroom`'s row; the design batch keeps
  φ = 1, as :func:`placer.flows.decode_design_for` says why). An arrival finds no room (and waits)
  when the others' KV exceeds K − f; the plan keeps M + z·√V ≤ K − f̄ (f̄: the footprint an
  arrival brings, the mix's mean by arrivals), z the normal quantile of
  :data:`KV_OCCUPANCY_QUANTILE`, so at most about 1 − q of arrivals wait (q = 0.95: z = 1.64).
* Linear for the MILP (:class:`KvHeadroom`): √V ≤ V/(2s) + s/2 for any s > 0 (the tangent of the
  square root at V = s², exact there, above it elsewhere), and the common-speed term
  M²(1 − φ)/(φB) = M·m·(1 − φ)/φ with m = M/B the held requests' mean footprint, taken at the
  scenario's mix (m_ref), so each held request adds f_k·(f_k + g) to V, g = m_ref·(1 − φ)/φ:
  Σ L_k · f_k · (1 + z·(f_k + g)/(2s)) ≤ K − f̄ − z·s/2, s the KV's standard deviation of a full
  instance, or where the row binds at the mix (:func:`kv_design_batch`, φ there too): there it is
  the quantile. Elsewhere the tangent is an
  upper bound, and the common term is exact for any pool whose held requests' mean footprint is
  m_ref, above it for a pool of shorter ones (a little conservative), below it for a pool of
  longer ones only (by the ratio of the means on that term).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from statistics import NormalDist

#: Tokens per KV block the planner and the simulator round a reservation to (vLLM's default block;
#: the executor rounds to its own engine's ``block_size``).
KV_BLOCK_TOKENS = 16
#: A decoder's KV is planned so that at most about 1 − q of arrivals find it full and wait for a
#: departure (the first decoder streams t0 on admission, so a KV wait there is TTFT). Such a wait is
#: short next to a request's stay: with L requests held for T seconds each, one leaves every T/L
#: (≈ 0.5 s for 20 requests of 512 tokens at 20 ms a step), and a wait usually needs one or two. At
#: 0.99 the headroom (z·s/2, a fifth of an H100's KV for 16K-token prompts) made the relay test
#: cases infeasible that the simulator serves without KV queues; 0.95 keeps them.
KV_OCCUPANCY_QUANTILE = 0.95
_STEP_EPS = 1e-7  # slack on step counts compared as floats (the simulator's step counter)


def footprint_tokens(prompt_tokens: float, output_tokens: float, block_tokens: int = KV_BLOCK_TOKENS) -> int:
    """KV tokens a decoder reserves for a request when it admits it: its whole final context
    (prompt + output budget) rounded up to whole blocks of ``block_tokens``."""
    if block_tokens < 1:
        raise ValueError(f"block_tokens must be >= 1, got {block_tokens!r}")
    tokens = max(0, math.ceil(prompt_tokens + output_tokens))
    return -(-tokens // block_tokens) * block_tokens


def admits(reserved_tokens: float, capacity_tokens: float, need_tokens: float, running: int,
           batch_cap: int | float = math.inf) -> bool:
    """Whether a decoder holding ``reserved_tokens`` of ``capacity_tokens`` for ``running`` requests
    admits one more that reserves ``need_tokens``: a free batch slot and room for its reservation;
    an idle decoder admits anything (never deadlock). The order is :func:`admit_order`'s."""
    if running == 0:
        return True
    return running < batch_cap and reserved_tokens + need_tokens <= capacity_tokens


def occupancy_quantile_z(quantile: float = KV_OCCUPANCY_QUANTILE) -> float:
    """The standard normal quantile z of ``quantile`` (1.64 at 0.95)."""
    if not 0.5 <= quantile < 1.0:
        raise ValueError(f"quantile must be in [0.5, 1), got {quantile!r}")
    return NormalDist().inv_cdf(quantile)


def fixed_step_share(step_s: float, next_step_s: float, batch: float) -> float:
    """φ: the share of a step at ``batch`` (``step_s``) the batch does not pay for, the step less what each
    sequence adds (``next_step_s``: the step with one more) times the batch; 1: a flat step (M/G/∞)."""
    if step_s <= 0:
        return 1.0
    per_seq = max(next_step_s - step_s, 0.0)
    return min(max(step_s - per_seq * batch, 0.0) / step_s, 1.0)


def held_fixed_share(fixed_share: float) -> float:
    """φ as the laws take it: in [0.02, 1] (a step with no fixed part has no steady batch: held above 0)."""
    return min(max(fixed_share, 0.02), 1.0)


def _per_request(footprints: Iterable[tuple[float, float, float]], fixed_share: float) -> tuple[float, float, float, float]:
    """(mean footprint m by time held, variance per held request v = :func:`kv_occupancy_variance` ÷ B,
    the arrivals' mean footprint f̄, total time weight) of a mix ((arrival weight, time weight, f) per
    class); zeros without one."""
    items = [(a, w, f) for a, w, f in footprints if w > 0]
    total = sum(w for _, w, _ in items)
    arrivals = sum(a for a, _, _ in items)
    if total <= 0:
        return 0.0, 0.0, 0.0, 0.0
    mean = sum(w * f for _, w, f in items) / total
    per_held = kv_occupancy_variance([(a, w / total, f) for a, w, f in items], fixed_share)
    arrival = sum(a * f for a, _, f in items) / arrivals if arrivals > 0 else 0.0
    return mean, per_held, arrival, total


@dataclass(frozen=True)
class KvHeadroom:
    """The linear KV row of one decode instance of ``capacity_tokens`` (module docstring):
    Σ_k L_k · :meth:`weight` (f_k) ≤ :attr:`limit_tokens`, with L_k = λ_k·T_k requests of class k
    held on average. ``s_tokens``: the tangent point (the KV's standard deviation where the row binds
    at the reference mix); ``arrival_tokens``: the footprint an arrival brings (it is admitted only if
    the others leave room for it: used ≤ K − f), the mix's mean by arrivals; ``common_tokens``: g, what
    each held token adds to the variance through the batch's common speed (m_ref·(1 − φ)/φ; 0: the
    Poisson law of a step that does not grow with the batch)."""

    capacity_tokens: float
    z: float
    s_tokens: float
    arrival_tokens: float = 0.0
    common_tokens: float = 0.0

    @classmethod
    def for_mix(cls, capacity_tokens: float, footprints: Iterable[tuple[float, float, float]],
                quantile: float = KV_OCCUPANCY_QUANTILE, fixed_share: float = 1.0,
                where_binds: bool = False) -> KvHeadroom:
        """The row for an instance of ``capacity_tokens`` tangent at the mix ``footprints`` ((arrival weight
        λ_k, time weight λ_k·T_k, each up to a factor, footprint f_k) per class), φ = ``fixed_share``, at a
        full instance, or (``where_binds``) where the row binds at the mix: there it is the quantile."""
        items = [(a, w, f) for a, w, f in footprints if w > 0 and f > 0]
        capacity = max(capacity_tokens, 0.0)
        mean, per_held, arrival, _ = _per_request(items, fixed_share)
        held = kv_design_batch(capacity, items, quantile, fixed_share) if where_binds else 0.0
        if held <= 0 and mean > 0:
            held = capacity / mean  # where the KV is full
        s = math.sqrt(held * per_held) if per_held > 0 else 1.0
        phi = held_fixed_share(fixed_share)
        return cls(capacity, occupancy_quantile_z(quantile), max(s, 1.0), arrival, mean * (1.0 - phi) / phi)

    def weight(self, footprint: float) -> float:
        """KV tokens one held request of footprint f counts for on the row: f·(1 + z·(f + g)/(2s))."""
        return footprint * (1.0 + self.z * (footprint + self.common_tokens) / (2.0 * self.s_tokens))

    @property
    def limit_tokens(self) -> float:
        """The row's right-hand side per instance: K − f_arrival − z·s/2 (0 when the headroom eats it all)."""
        return max(0.0, self.capacity_tokens - self.arrival_tokens - self.z * self.s_tokens / 2.0)

    def fraction(self) -> float:
        """η = limit / K: the share of the KV a plan may fill on average (before the quadratic term)."""
        return self.limit_tokens / self.capacity_tokens if self.capacity_tokens > 0 else 0.0


def kv_design_batch(capacity_tokens: float, footprints: Iterable[tuple[float, float, float]],
                    quantile: float = KV_OCCUPANCY_QUANTILE, fixed_share: float = 1.0) -> float:
    """The mean batch L an instance of ``capacity_tokens`` carries at the KV quantile for a mix of
    ``footprints`` ((arrival weight, time weight, footprint f) per class, as
    :meth:`KvHeadroom.for_mix`): the largest L with L·m + z·√(L·v) ≤ K − f_arrival, m the mean
    footprint held and L·v the occupancy variance of :func:`kv_occupancy_variance` (negative
    binomial for a step of fixed share ``fixed_share``; exact, no tangent). 0 without a mix."""
    mean, per_held, arrival, total = _per_request(footprints, fixed_share)
    if total <= 0 or capacity_tokens <= 0:
        return 0.0
    if mean <= 0:
        return math.inf
    room = capacity_tokens - arrival
    if room <= 0:
        return 0.0
    z = occupancy_quantile_z(quantile)
    # x = √L: mean·x² + z·√v·x − room = 0
    b = z * math.sqrt(per_held)
    root = (-b + math.sqrt(b * b + 4.0 * mean * room)) / (2.0 * mean)
    return root * root


def kv_occupancy_variance(load: Iterable[tuple[float, float, float]], fixed_share: float = 1.0) -> float:
    """Variance (tokens²) of the KV a decoder holds for ``load`` ((arrivals/s, held L_k, footprint f_k)).

    With a step that does not depend on the batch the requests held are M/G/∞: Poisson in number,
    the KV compound Poisson, variance Σ L_k f_k². But a decode step grows with what the batch holds
    (each sequence adds its KV read and FLOPs): step(n) = a + c·n, so when more requests are held each
    stays longer, and the number held is a birth-death chain with π(n)/π(n − 1) = λO(a + c·n)/n —
    negative binomial, variance the Poisson one over φ, φ = a / step(mean batch) (``fixed_share``:
    the share of the step the batch does not pay for; 1: the M/G/∞ law). As a Poisson count mixed by
    the common speed (a Gamma factor of variance (1 − φ)/(φ·B)) the KV's variance is
    Σ L_k f_k² + M²·(1 − φ)/(φ·B), M = Σ L_k f_k, B = Σ L_k. (The simulator's H800 tp4 decoder of
    the random scenario rnd-7-37, φ = 0.20: a batch of 101.7 of variance 503, the KV's standard
    deviation 354K tokens, where M/G/∞ says 167K and this 360K.)"""
    items = [(h, f) for _, h, f in load if h > 0]
    held = sum(h for h, _ in items)
    if held <= 0:
        return 0.0
    mean = sum(h * f for h, f in items)
    phi = held_fixed_share(fixed_share)
    return sum(h * f * f for h, f in items) + mean * mean * (1.0 - phi) / (phi * held)


def kv_wait_probability(capacity_tokens: float, load: Iterable[tuple[float, float, float]],
                        fixed_share: float = 1.0) -> float:
    """Share of arrivals that find no KV room for their own reservation at a decoder of ``capacity_tokens``
    for ``load`` ((arrivals per second, requests held at once L_k, footprint f_k) per class), no line in
    front: the others' KV is normal (mean Σ L_k f_k, :func:`kv_occupancy_variance`) and a class-k arrival
    finds it above K − f_k (PASTA). The wait itself, the line included, is :func:`placer.kv_wait.kv_wait_law`'s."""
    rows = [(a, h, f) for a, h, f in load if a > 0 or h > 0]
    arrivals = sum(a for a, _, _ in rows)
    if arrivals <= 0 or capacity_tokens <= 0:
        return 0.0
    mean = sum(h * f for _, h, f in rows)
    sd = math.sqrt(kv_occupancy_variance(rows, fixed_share))
    normal = NormalDist()
    share = sum(a * (1.0 - normal.cdf((capacity_tokens - f - mean) / sd)) if sd > 0 else
                a * (1.0 if mean > capacity_tokens - f else 0.0) for a, _, f in rows)
    return share / arrivals


def admit_order(capacity_tokens: float, reserved_tokens: float, running: int, batch_cap: int | float,
                holds: Iterable[tuple[float, float]], waiting: Sequence[tuple[float, float]],
                now: float) -> list[int]:
    """Which waiting requests a decoder admits now, by :func:`admits` with EASY backfilling (the module
    docstring): the indices into ``waiting`` ((need tokens, steps it stays), in arrival order), in the
    order they are admitted. ``holds``: (end step, tokens) of each request it holds, in ascending order
    (read only as far as the head's shadow: a lazy iterator over a large batch costs only the few ends
    that come first — the simulator's :class:`placer.sim.decode.DecodeInstance` reads its finish heap
    so, where sorting its whole batch at every join took 60 % of a KV-bound run); ``now``: the
    decoder's step counter (the batch steps in lockstep, so a request admitted at step a that emits n
    tokens here leaves at a + n, whatever each step's duration). An unknown stay is ``math.inf``: no one
    passes a head whose room depends on it.

    The head of the line is admitted as soon as it fits (FIFO). While it does not, its *shadow* S is
    the step at which enough of the held requests will have left for it to fit; a follower that fits
    now passes it if it leaves by S, or if it fits in what S leaves spare beside the head. The head
    is therefore never admitted later than strict FIFO would admit it: no starvation, no bound to
    tune."""
    admitted: list[int] = []
    joined = []  # (end step, tokens) of those admitted here in order, FIFO
    i, n = 0, len(waiting)
    while i < n and admits(reserved_tokens, capacity_tokens, waiting[i][0], running, batch_cap):
        need, steps = waiting[i]
        reserved_tokens += need
        running += 1
        joined.append((now + steps, need))
        admitted.append(i)
        i += 1
    if i >= n - 1:
        return admitted
    head = waiting[i][0]
    free = capacity_tokens - reserved_tokens
    slots = batch_cap - running
    shadow, spare, spare_slots = math.inf, -1.0, 0
    last = math.inf  # the latest end: where nothing held is left (inf: nothing is held)
    joined.sort()
    for end, need in heapq.merge(holds, joined):
        last = end
        free += need
        slots += 1
        if free >= head and slots >= 1:
            shadow, spare, spare_slots = end, free - head, slots - 1
            break
    else:  # larger than the decoder: it runs alone, once every request held has left
        shadow = last
    if shadow == math.inf:
        return admitted  # the head's room depends on a stay nobody knows: FIFO
    for j in range(i + 1, n):
        need, steps = waiting[j]
        if not admits(reserved_tokens, capacity_tokens, need, running, batch_cap):
            continue
        if now + steps <= shadow + _STEP_EPS:
            pass  # gone before the head's room comes
        elif need <= spare and spare_slots >= 1:
            spare -= need
            spare_slots -= 1
        else:
            continue
        reserved_tokens += need
        running += 1
        admitted.append(j)
    return admitted


class KvGate:
    """A decoder's KV admissions by :func:`admit_order` (:func:`admits`, FIFO with EASY backfilling):
    the reservations it holds and the requests waiting for room, each with an opaque ``item`` (the
    executor: the KV message to import once admitted) and the tokens it will emit here (its stay, in
    steps; the executor gives the output budget). ``now`` is the decoder's step counter. Where a
    request stops early (EOS, a handoff), the shadow comes earlier than computed; the head is then
    admitted no later than the step its room comes if every request ran its whole budget. The
    simulator keeps the same books inline (:class:`placer.sim.decode.DecodeInstance`, for speed)
    and admits by the same :func:`admit_order`."""

    def __init__(self, capacity_tokens: float, batch_cap: int | float = math.inf) -> None:
        self.capacity_tokens = capacity_tokens
        self.batch_cap = batch_cap
        self.reserved: dict[Hashable, int] = {}
        self.ends: dict[Hashable, float] = {}
        self.waiting: deque[tuple[Hashable, int, Any, float]] = deque()

    @property
    def reserved_tokens(self) -> int:
        return sum(self.reserved.values())

    def offer(self, key: Hashable, need_tokens: int, item: Any = None, steps: float = math.inf,
              now: float = 0.0) -> bool:
        """Admit ``key`` (reserving ``need_tokens`` for ``steps`` steps from step ``now``; True) or queue it
        (False): it joins the line, and is admitted at once if :func:`admit_order` lets it pass."""
        if key in self.reserved:
            return True
        if all(k != key for k, _, _, _ in self.waiting):
            self.waiting.append((key, need_tokens, item, steps))
        for _ in self._admit(now, only=key):
            pass
        return key in self.reserved

    def release(self, key: Hashable, now: float = 0.0) -> tuple[list[Any], Any]:
        """``key`` leaves (finished, handed off, dropped) at step ``now``: its reservation, or its place in
        the line, is freed. Returns (the items now admitted, in order, each reserved; the item ``key``
        waited with, None if it was admitted)."""
        dropped = None
        if self.reserved.pop(key, None) is None:
            for i, (k, _, item, _) in enumerate(self.waiting):
                if k == key:
                    del self.waiting[i]
                    dropped = item
                    break
        self.ends.pop(key, None)
        return list(self._admit(now)), dropped

    def _admit(self, now: float, only: Hashable | None = None) -> Iterator[Any]:
        """Admit by :func:`admit_order`; with ``only``, that key alone (an offer: every other request was
        already weighed at the last change, and waiting longer only narrows what may pass)."""
        if not self.waiting:
            return
        line = list(self.waiting)
        order = admit_order(self.capacity_tokens, self.reserved_tokens, len(self.reserved), self.batch_cap,
                            sorted((self.ends[k], need) for k, need in self.reserved.items()),
                            [(need, steps) for _, need, _, steps in line], now)
        if only is not None:
            order = [j for j in order if line[j][0] == only][:1]
        if not order:
            return
        taken = set(order)
        self.waiting = deque(w for j, w in enumerate(line) if j not in taken)
        for j in order:
            k, need, item, steps = line[j]
            self.reserved[k] = need
            self.ends[k] = now + steps
            yield item
