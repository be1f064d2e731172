"""How long a decoder's arrivals wait for KV room, the line in front included (issue 42).

in:  :mod:`placer.kv_admission` (the occupancy's variance, the step's fixed share; the standard library only:
     tests/test_layers.py checks it)
out: :func:`kv_wait_law` — (share of arrivals that wait for KV room, mean seconds those wait) at a decoder
     that admits by :func:`placer.kv_admission.admit_order` (reserve-on-admit, FIFO with EASY backfilling);
     :func:`kv_room_beta` (its β; one arrival's own: :mod:`placer.kv_class_wait`, each class's wait),
     :func:`waiting_share` (who waits at β), :func:`kv_drain_rate` (the tokens/s a full decoder gives back) and :func:`kv_line_relaxation` (how slowly its line forgets: what a
     simulation must warm up past, ``bench/agreement_pools.py``)

An arrival waits when the others' reservations leave no room for its own, *or when a line is already
waiting* (FIFO: it joins the line's tail; EASY backfilling lets only the few that fit and leave early
pass). Pricing only the first (PASTA on the occupancy: P(X > K − f)) missed most waits on a full decoder:
rnd-7-33's re-solved plan (its decoders at 94 % of their KV) planned 13.5 % and 8.3 % of arrivals
waiting where the simulator made 27 % and 18–21 % wait, nearly all of them behind a line.

The law is Halfin and Whitt's for many servers (the KV's tokens are the servers, a request takes f of
them), on the occupancy the planner already knows. Below the capacity the KV held X is the
free decoder's: normal, mean M = Σ L_k f_k, variance V (:func:`placer.kv_admission.kv_occupancy_variance`:
negative binomial where the step grows with the batch), a process that drifts back to M. Once it
reaches the capacity the decoder admits no faster than requests leave, and the reservations held and
waiting, X, run as a random walk with the drift the occupancy had there; the same variance per
second carries it on both sides, so above the capacity X − K is exponential of mean V / g (g the
room left above the mean, in tokens: K − M less the arrival's footprint beyond a held request's mean,
f̄ − M/B), and the stationary density is continuous at K. With β = g / √V:

* P(wait) = 1 / (1 + β·Φ(β)/φ(β)) (Φ, φ: the standard normal's cdf and density) — Erlang's C in
  Halfin and Whitt's limit, and P(X > K) scaled up by the line: ≈ 1.2 Q(β) at β = 1.64, 1.4 Q(β) at 1.
* Those wait for the line ahead (mean V / g tokens) and their own footprint f̄ to be given back, at the
  tokens/s that leave a full decoder: Σ λ_k f_k × (K/M) / (φ + (1 − φ)·K/M) (more held, each step
  slower; φ the step's fixed share). A request's stay is nearly fixed (its output over the batch's
  steps), not exponential: a many-server queue with general stays waits (1 + c²)/2 of the exponential
  one's (Lee and Longton), c² the stays' squared coefficient of variation over the arrivals — at most 1:
  what the factor prices is how irregularly a full decoder gives room back, and the departures of many
  requests held at once are a superposition, no more irregular than Poisson (Palm and Khintchine) however
  the stays spread (rnd-7-33's Gaudi3 decoders, stays 3–157 s, c² 3.5: the waits simulated 3.4–3.9 s,
  this 3.7 s; uncapped 8.2 s).

The MILP's KV row (:class:`placer.kv_admission.KvHeadroom`, M + z·√V ≤ K − f̄ at q = 0.95) still means what it
says with the line priced: at its bound β ≥ z + M/(B·√V) ≥ 1.64, where this law makes at most 6.2 % of arrivals
wait (Q(1.64) = 5 % without the line), so the row needs no other quantile. A plan's decoders sit past that
only where the evaluation's occupancy is wider or fuller than the row's (its settled step's φ, the stays at the
settled batch: rnd-7-33's re-solved plan, β 1.13 and 1.43), and there the plan's promise carries this law's
wait into TTFT, the SLA check (``metrics.sla_met``) included.

Against the simulator's decoder (:class:`placer.sim.decode.DecodeInstance`, tests/placer/test_kv_line_law.py)
at 80–97 % fill, one class or a long and a short one, a flat step or one that grows with the batch:
over 24 cells (a flat step and φ ≈ 0.35; one class, a long and a short, a big short one and a small long one)
the share within 0.10 of the simulator's (0.08 up to 95 %) and the mean wait −16 % to +47 % (the old law, no line:
shares 0.6–0.7 of the simulator's at 95 % fill, waits 0.3–0.65 of them). A decoder's KV wanders on the time scale of
its longest stays, so a simulation shorter than tens of them reads its own fill, not the plan's: rnd-7-33's Gaudi3
mix (stays up to 157 s) read 19–25 % waiting over 150,000 requests at 93–95 % mean fill for the plan's 94 %; this
law gives 18 % at the 95 % that run held (24 % waited there: within 0.07).
Over 150 stays (rnd-7-33's dc1 Gaudi3 decoder alone fed its plan's classes, 850,000 requests) the simulator's
decoder made 17.2 % wait 4.16 s on average at the plan's 94 % fill, this law 17.5 % and 4.01 s; its windows of three
stays (the agreement bench's) read 0-50 % (tests/placer/test_kv_line_law.py, long stays beside short ones).
rnd-7-17's dc-a H800 decoder (four classes, stays 11-42 s, φ 0.21: its KV forgets over stays ÷ φ, ~190 s) alone
over 1,700 stays, two seeds: 78.2 / 76.8 % full, 22.0 / 22.2 % waited 6.63 / 7.09 s, the line ahead 354K / 378K
tokens; this law at those fills 23.5 / 20.7 %, 6.54 / 6.16 s, the line 434K. Its bench row's single runs (2,865 s)
read 68-85 % full and 1-44 % waiting by seed (twelve pooled: 78.2 %, 24.2 %, 6.70 s). The plan's fill is its batch
law's requests (:mod:`placer.decode_state`: λ × output × the step a token sees): 77.0 %, 21.1 % waiting 6.29 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist

from placer.kv_admission import held_fixed_share, kv_occupancy_variance

#: β below this is a decoder whose mean KV meets its capacity: no steady line (the law's wait is that of β here,
#: long but finite, so that a plan that far over is priced as missing its SLA rather than dropped).
_BETA_MIN = 0.05
#: β above this: fewer than 1e-12 of arrivals wait (taken as none: a share that small underflows the tail's moments).
_BETA_MAX = 7.0


def kv_room_beta(capacity_tokens: float, load: Iterable[tuple[float, float, float]],
                 fixed_share: float = 1.0, arrival_tokens: float | None = None) -> float:
    """β: the KV room above the mean a decoder holds for ``load`` ((arrivals/s λ_k, held L_k, footprint f_k) per
    class), less the arrival's footprint beyond a held request's mean, over the occupancy's standard deviation (the
    module docstring; at least :data:`_BETA_MIN`); ``math.inf`` where nothing is held or the KV never varies.
    ``arrival_tokens``: one arrival's footprint (:mod:`placer.kv_class_wait`); the arrivals' mean if None."""
    rows = [(a, h, f) for a, h, f in load if a > 0 or h > 0]
    arrivals = sum(a for a, _, _ in rows)
    held = sum(h for _, h, _ in rows)
    mean = sum(h * f for _, h, f in rows)
    var = kv_occupancy_variance(rows, fixed_share)
    if arrivals <= 0 or held <= 0 or capacity_tokens <= 0 or var <= 0 or mean <= 0:
        return math.inf
    sd = math.sqrt(var)
    arrival_f = sum(a * f for a, _, f in rows) / arrivals if arrival_tokens is None else arrival_tokens
    return max(capacity_tokens - mean - (arrival_f - mean / held), _BETA_MIN * sd) / sd


def kv_line_relaxation(beta: float) -> float:
    """How many of its occupancy's relaxation times (a stay ÷ φ) a decoder's line for KV room takes to forget its
    level: above the capacity the line is a reflected Brownian motion of drift g / τ and variance 2V / τ per
    second (the occupancy's, τ its relaxation time), whose relaxation time is 2σ²/μ² (Abate and Whitt) = 4 / β²
    of τ; at least 1 (the occupancy's own, where the KV seldom binds)."""
    return max(1.0, 4.0 / (beta * beta)) if beta > 0 else 1.0


def waiting_share(beta: float) -> float:
    """The share of arrivals that wait at β (Erlang's C in Halfin and Whitt's limit, the module docstring):
    1 / (1 + β·Φ(β)/φ(β)); none above :data:`_BETA_MAX` (and at β = inf)."""
    if beta > _BETA_MAX:
        return 0.0
    normal = NormalDist()
    return 1.0 / (1.0 + beta * normal.cdf(beta) / normal.pdf(beta))


def kv_drain_rate(capacity_tokens: float, load: Iterable[tuple[float, float, float]],
                  fixed_share: float = 1.0) -> float:
    """Tokens/s a full decoder gives back: Σ λ_k f_k × (K/M) / (φ + (1 − φ)·K/M) (the module docstring)."""
    rows = [(a, h, f) for a, h, f in load if a > 0 or h > 0]
    mean = sum(h * f for _, h, f in rows)
    leave = sum(a * f for a, _, f in rows)  # tokens/s given back on average
    if mean <= 0:
        return leave
    phi = held_fixed_share(fixed_share)
    full = max(capacity_tokens / mean, 1.0)
    return leave * full / (phi + (1.0 - phi) * full)


def kv_wait_law(capacity_tokens: float, load: Iterable[tuple[float, float, float]],
                fixed_share: float = 1.0) -> tuple[float, float]:
    """(share of arrivals that wait for KV room, mean seconds those wait) at a decoder of ``capacity_tokens``
    for ``load``: (arrivals per second λ_k, requests held at once L_k, footprint f_k) per class;
    ``fixed_share``: φ, the share of a step the batch does not pay for (1: a flat step). The line in front
    included (the module docstring)."""
    rows = [(a, h, f) for a, h, f in load if a > 0 or h > 0]
    arrivals = sum(a for a, _, _ in rows)
    held = sum(h for _, h, _ in rows)
    if arrivals <= 0 or held <= 0 or capacity_tokens <= 0:
        return 0.0, 0.0
    mean = sum(h * f for _, h, f in rows)
    var = kv_occupancy_variance(rows, fixed_share)
    arrival_f = sum(a * f for a, _, f in rows) / arrivals
    if var <= 0 or mean <= 0:
        return (1.0 if mean + arrival_f > capacity_tokens else 0.0), 0.0
    beta = kv_room_beta(capacity_tokens, rows, fixed_share)
    gap = beta * math.sqrt(var)
    if beta > _BETA_MAX:
        return 0.0, 0.0
    share = waiting_share(beta)
    rate = kv_drain_rate(capacity_tokens, rows, fixed_share)
    stays = [(a, h / a) for a, h, _ in rows if a > 0]
    stay = sum(a * t for a, t in stays) / arrivals
    scv = sum(a * (t - stay) ** 2 for a, t in stays) / arrivals / (stay * stay) if stay > 0 else 0.0
    wait = (var / gap + arrival_f) / rate * (1.0 + min(scv, 1.0)) / 2.0
    return share, wait
