"""Simulator runs for the report: TTFT distribution and RLD token share over time.

in:  a Problem, a Plan, how many requests and the seed
out: :class:`SimRun` — the Simulation JSON of docs/contracts.md plus, per measured request,
     its TTFT, finish time, output tokens and the tokens RelayDecode produced.

The Simulation JSON carries TTFT percentiles and per-line Gbit/s over time but neither
a TTFT distribution nor RLD output over time, so :class:`_Recording` subclasses the
simulator's public :class:`placer.sim.Simulation` and notes each measured request as it
finishes (the only hook it needs is ``_finish(req, t)``). If that hook ever changes
shape, the run falls back to the plain JSON: the CDF is then drawn through the P50 /
P90 / P99 points and the RLD share over time is left out (``SimRun.per_request`` False).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from placer.plan import Plan


@dataclass
class SimRun:
    name: str
    data: dict
    ttft_s: list[float] = field(default_factory=list)
    """TTFT of each measured request, sorted (empty without per-request data)."""
    finish_t_s: list[float] = field(default_factory=list)
    out_tokens: list[int] = field(default_factory=list)
    rld_tokens: list[int] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    """Time per output token of each measured request after its first, sorted (empty without data)."""

    @property
    def per_request(self) -> bool:
        return bool(self.ttft_s)

    @property
    def load_rps(self) -> float:
        return float(self.data.get("offered_rps", 0.0))


def _recording_class():
    from placer.sim import Simulation

    class _Recording(Simulation):
        def _finish(self, req, t: float) -> None:
            before = self.measured
            super()._finish(req, t)
            if self.measured > before:
                tpot_s = (t - req.t_first) / (req.n_out - 1) if req.n_out > 1 else math.nan
                self.rec.append((t, req.t_first - req.t_arr, req.n_out, req.rld_tokens, tpot_s))

    return _Recording


def simulate_plan(problem, plan: Plan, name: str, requests: int = 5000, seed: int = 0) -> SimRun:
    """Replay ``plan`` at the load it carries; per-request data where the simulator allows.

    Raises the simulator's typed errors (InputError for a plan the scenario does not fit).
    """
    from placer.optimize import evaluate_plan
    from placer.sim import SimConfig, simulate

    config = SimConfig(requests=requests, seed=seed)
    if not plan.assignments:
        plan = evaluate_plan(problem, plan)
    try:
        sim = _recording_class()(problem, plan, config)
        sim.rec = []
        result = sim.run()
        rec = sim.rec
    except (AttributeError, TypeError):  # the hook changed: fall back to the public function
        result, rec = simulate(problem, plan, config), []
    rec.sort(key=lambda r: r[0])
    return SimRun(name=name, data=result.data, ttft_s=sorted(r[1] for r in rec),
                  finish_t_s=[r[0] for r in rec], out_tokens=[r[2] for r in rec], rld_tokens=[r[3] for r in rec],
                  tpot_s=sorted(r[4] for r in rec if not math.isnan(r[4])))


def cdf_points(run: SimRun, max_points: int = 400, metric: str = "ttft") -> tuple[list[float], list[float]]:
    """(TTFT s, or TPOT s with ``metric="tpot"``; fraction of requests at or below it),
    thinned to at most ``max_points``.

    Without per-request data: the percentile points of the Simulation JSON.
    """
    xs = run.ttft_s if metric == "ttft" else run.tpot_s
    if not xs:
        d = run.data
        if metric == "tpot":
            return [d["tpot_p50_s"], d["tpot_p90_s"]], [0.5, 0.9]
        return [d["ttft_p50_s"], d["ttft_p90_s"], d["ttft_p99_s"]], [0.5, 0.9, 0.99]
    n = len(xs)
    step = max(1, n // max_points)
    idx = list(range(0, n, step))
    if idx[-1] != n - 1:
        idx.append(n - 1)
    return [xs[i] for i in idx], [(i + 1) / n for i in idx]


def rld_share_series(run: SimRun, bins: int = 40) -> tuple[list[float], list[float | None]]:
    """(bin start s, RLD share of the output tokens of requests finishing in the bin).

    A bin without finished requests has share None.
    """
    if not run.finish_t_s:
        return [], []
    t0, t1 = run.finish_t_s[0], run.finish_t_s[-1]
    width = max((t1 - t0) / bins, 1e-9)
    total = [0] * bins
    rld = [0] * bins
    for t, n, r in zip(run.finish_t_s, run.out_tokens, run.rld_tokens):
        i = min(bins - 1, int((t - t0) / width))
        total[i] += n
        rld[i] += r
    return [t0 + i * width for i in range(bins)], [rld[i] / total[i] if total[i] else None for i in range(bins)]
