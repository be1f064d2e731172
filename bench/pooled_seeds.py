"""A bench row's simulated figures pooled over seeds (issue 42): what a row of the agreement bench compares.

in:  a Problem, its Plan and a :class:`~placer.sim.SimConfig` (classes drawn, or a trace replayed); the least
     seeds, the most, the standard error to reach (:func:`seed_range` gives each kind's)
out: :func:`pooled_runs` — one result (``SimResult``-like: ``[key]`` and ``.route``) whose TTFT quantiles, goodput,
     SLA attainment and routes pool the measured requests of K runs (seeds ``seed`` … ``seed + K − 1``), and
     :class:`Spread`: each run's TTFT P90, the pooled P90 and its jackknife standard error over the runs.

Why: one run is one window of the plan's randomness, and a row judged on it judges that window's luck.
A trace is a few thousand requests: the seed draws where each lands in its 3-s bin
(:func:`placer.sim.sources.spread_in_bins`) and which pool and instance the plan's split sends it to, and one
replay's P90 turns on where the trace's few very long prompts land (rnd-7-24-trace: −27 … +31 % over four seeds
of one plan). A drawn run measures a few of its decoders' stays (``agreement_pools.MEASURED_STAYS``), and a
decoder's KV wanders on that time scale: rnd-7-33-mixed's Gaudi3 decoders (157-s stays) make 0-50 % of
arrivals wait for KV over a 3-stay window where 150 stays read 17.2 % (``placer/kv_wait.py``). Occupancies a
stay apart are independent, so runs of other seeds, each warmed past the decoders' fill, are independent
windows; their requests pooled are the quantile the plan prices, and the jackknife (leave one run out) says how
far it may still move. Seeds are added until that error is under 3 % of the pooled P90 (or the most are run); a
row is judged on the pooled P90, never on a chosen seed.

A row that stops unsettled says so. Where a plan's decoders run near their KV (β ≈ 1: the line for KV room
forgets over 4/β² of the occupancy's relaxation, ``agreement_pools.forget_s``) the line wanders between quiet
stretches and congested ones over ~10³ s, and the mix's P90 sits on the share of requests it catches (rnd-7-33:
each 50 s of a run 1-24 % of requests late; seeds' P90 0.61 … 7.75 s, twelve pooled −4.0 % ± 14.8 %): a few
million requests leave its jackknife error far above 3 %, and the row's error is then that window's, not the
law's. So each run measures at least one of its decoders' relaxation times (``agreement_pools.
MEASURED_RELAXATIONS``; shorter windows are not independent samples of that mode, and a seed's warm-up costs
two of them whatever it measures), the least seeds run whole however long that makes them (the row's request
budget is :data:`MAX_POOLED_REQUESTS` or those seeds' runs, whichever is more: it scales with the row's
relaxation), more seeds only within it, and a row whose pooled P90's jackknife error is still above
:data:`UNSETTLED_STDERR` of it is printed *unsettled* beside its error (:attr:`Spread.settled`): its verdict
against the 10 % and 25 % bands is not the plan's.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

from placer.sim import engine as sim_engine
from placer.sim import simulate
from placer.sim.metrics import QuantileSketch
from placer.sim.result import SimResult, _route_rows

#: A trace row's seeds, the least and the most: a replay is a few thousand requests (cheap), and its P90 moves
#: a third with the seed, so two runs that happen to agree say little.
TRACE_LEAST, TRACE_MOST = 8, 32
#: A drawn row's (mixed, relay): each run is warmed past the decoders' fill and measures three of their stays, so
#: a long-stay row's run is 10⁵-10⁶ requests. Three at least: two runs' jackknife error is half their difference,
#: one degree of freedom, and two that agree by chance stop it — the two-dc test case at 400 requests, seeds 7 and 8:
#: P90 1.064 and 1.070 s ("± 0.2 %") where seeds 7-11 read 1.03 … 1.39 s.
DRAWN_LEAST, DRAWN_MOST = 3, 16
#: Seeds are added while the pooled TTFT P90's jackknife standard error is above this share of it.
TARGET_STDERR = 0.03
#: …and while another run keeps a row's simulated requests, warm-ups included, within this many: rnd-7-33-mixed's
#: run is 0.37M (157-s stays at 463 req/s, five of them), and its 16 seeds took 9 of the bench's 14 minutes at
#: 4.2 % (each seed's P90 0.62 … 1.16 s: under 3 % takes ~30), so it stops at 8 and prints where it stopped.
MAX_POOLED_REQUESTS = 3_000_000
#: A row whose pooled P90's jackknife error is above this share of it has not settled: half the 10 % band, so that
#: at two standard errors it may still cross the whole band (rnd-7-33-mixed: ± 15.6 % on 3 seeds, 14.8 % on 12).
UNSETTLED_STDERR = 0.05


def seed_range(config) -> tuple[int, int]:
    """The least and the most seeds a row of ``config``'s kind pools (:data:`TRACE_LEAST`, :data:`DRAWN_LEAST`)."""
    return (TRACE_LEAST, TRACE_MOST) if config.workload == "trace" else (DRAWN_LEAST, DRAWN_MOST)


@dataclasses.dataclass(frozen=True)
class Spread:
    """The first seed, each run's TTFT P90 (s), the pooled one and the pooled one's jackknife standard error (s)."""

    seed: int
    p90s: tuple[float, ...]
    pooled_p90_s: float
    stderr_s: float

    def seeds(self) -> str:
        k = len(self.p90s)
        return f"seed {self.seed}" if k == 1 else f"seeds {self.seed}-{self.seed + k - 1}"

    @property
    def settled(self) -> bool:
        """Whether the pooled P90's jackknife error is within :data:`UNSETTLED_STDERR` of it (one run: no error
        to judge by, taken as settled)."""
        return not self.stderr_s > UNSETTLED_STDERR * self.pooled_p90_s

    def line(self) -> str:
        lo, hi = min(self.p90s), max(self.p90s)
        return (f"{self.seeds()}: P90 {lo:.3f} … {hi:.3f} s each, pooled {self.pooled_p90_s:.3f} s "
                f"± {self.stderr_s:.3f} (jackknife, {self.stderr_s / self.pooled_p90_s:.1%})"
                + ("" if self.settled else f"; unsettled (above {UNSETTLED_STDERR:.0%}): the row's error is "
                   "its runs' window, not the plan's"))


def _merged(sketches) -> QuantileSketch:
    out = QuantileSketch()
    for s in sketches:
        out.merge(s)
    return out


def _jackknife_se(sketches: list[QuantileSketch], q: float) -> float:
    """Standard error of the pooled q-quantile by leaving one run out at a time."""
    k = len(sketches)
    if k < 2:
        return math.nan
    est = [_merged(sketches[:i] + sketches[i + 1:]).quantile(q) for i in range(k)]
    mean = sum(est) / k
    return math.sqrt((k - 1) / k * sum((e - mean) ** 2 for e in est))


def spread_of(seed: int, sketches: list[QuantileSketch], p90s: list[float] | None = None) -> Spread:
    """The :class:`Spread` of runs' TTFT sketches (the first run's seed ``seed``): each one's P90 (``p90s`` when
    given: each run's as its result rounds it, which the bench prints), the pooled P90 and its jackknife standard
    error."""
    each = tuple(p90s) if p90s is not None else tuple(s.quantile(0.9) for s in sketches)
    return Spread(seed, each, _merged(sketches).quantile(0.9), _jackknife_se(list(sketches), 0.9))


def _counts(sim) -> SimpleNamespace:
    """What pooling needs of a finished simulation (the rest of it, its requests and pools, is let go)."""
    return SimpleNamespace(ttft=sim.ttft, measured=sim.measured, good=sim.good, rejected=sim.rejected_measured,
                           route_ttft=sim.route_ttft, route_good=sim.route_good, tokens=sim.tokens_total,
                           tokens_rld=sim.tokens_rld)


def pooled_runs(problem, plan, config, least: int | None = None, most: int | None = None,
                target_stderr: float = TARGET_STDERR,
                max_requests: int = MAX_POOLED_REQUESTS) -> tuple[SimResult, Spread]:
    """Runs of ``config`` (seeds ``config.seed + i``), their measured requests pooled (see the module): ``least``,
    then one more at a time while the pooled TTFT P90's jackknife standard error is above ``target_stderr`` of it,
    ``most`` at the most (defaults: :func:`seed_range`) and while the runs' requests stay within ``max_requests``
    or the least seeds' runs, whichever is more (the :class:`Spread` says where it stopped, and whether it
    settled)."""
    lo, hi = seed_range(config)
    least = least or lo
    most = max(most or hi, least)
    budget = max(max_requests, least * config.requests)  # the least seeds run whole (agreement_pools' run length)
    runs, p90s, made = [], [], []

    def build(*args):
        made.append(sim_engine.Simulation(*args))
        return made[-1]

    while True:
        result = simulate(problem, plan, dataclasses.replace(config, seed=config.seed + len(runs)),
                          simulation_class=build)
        sim = made.pop()
        if not runs:
            data, offered, router = dict(result.data), sim.offered_rps, sim.router
        runs.append(_counts(sim))
        p90s.append(result["ttft_p90_s"])
        pooled_p90 = _merged(r.ttft for r in runs).quantile(0.9)
        settled = _jackknife_se([r.ttft for r in runs], 0.9) <= target_stderr * pooled_p90
        if len(runs) >= most or len(runs) >= least and (settled or (len(runs) + 1) * config.requests > budget):
            break
    ttft = _merged(r.ttft for r in runs)
    measured, good = sum(r.measured for r in runs), sum(r.good for r in runs)
    rejected, tokens = sum(r.rejected for r in runs), sum(r.tokens for r in runs)
    served_rps = offered * (measured - rejected) / measured if measured else 0.0
    pooled = SimpleNamespace(router=router, measured=measured,
                             route_ttft=[_merged(r.route_ttft[i] for r in runs) for i in range(len(router.routes))],
                             route_good=[sum(r.route_good[i] for r in runs) for i in range(len(router.routes))])
    data.update(measured_requests=measured, ttft_p50_s=ttft.quantile(0.5), ttft_p90_s=ttft.quantile(0.9),
                ttft_p99_s=ttft.quantile(0.99), ttft_mean_s=ttft.mean,
                sla_attainment=good / measured if measured else 0.0,
                goodput_rps=offered * good / measured if measured else 0.0, served_rps=served_rps,
                rld_token_share=sum(r.tokens_rld for r in runs) / tokens if tokens else 0.0,
                routes=_route_rows(pooled, served_rps), seeds=len(runs))
    return SimResult(data), spread_of(config.seed, [r.ttft for r in runs], p90s)
