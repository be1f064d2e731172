"""Break-even answers a buyer asks of `placer compare`: at what GPU-B price, and at what line
bandwidth, does PDD's BCR equal same-DC PD's?

in:  a Problem, the PDD plan and the same-dc-pd baseline plan at today's figures, a SolveConfig
out: ``{"price": {...}, "bandwidth": {...}}``, each with the figure today, the break-even
     figure (None when there is no crossing within the searched range), the same-dc-pd plan it
     is measured against (``against``: :func:`against_words`) and sentences that name it.

Method: d(v) = BCR_PDD(v) − BCR_same-dc-pd(v), where v is the price of the chip named
GPU-B (USD/h per chip) or the bandwidth of one line (Gbit/s, both directions). The
baseline is the same-dc-pd plan of today's figures — the buyer's question is "when does
PDD match the PD cluster I would otherwise run" — so it is re-solved at v only when that
plan itself runs on the priced chip (a line never changes it). That plan is same-dc-pd **within
the scenario's inventory** (``compare``'s ``baselines["same-dc-pd"]``, never its scaled twin): where
it cannot carry the whole load it stops at its best BCR, partial load, while PDD carries the whole
load — the question and the answer say so. The search brackets a sign change of d by doubling (or halving)
v from today's value at most :data:`BRACKET_STEPS` times, then bisects it until the
bracket is within :data:`REL_TOL` of v or :data:`MAX_BISECTIONS` re-solves are spent.
Each re-solve gets ``per_solve_s`` seconds (a plan found within that limit counts).
Bisection assumes one crossing in the bracket; the answer is the bracket's midpoint. Where
PDD has no plan at v (a thinner line can leave no way to meet the SLA), the sign change
is a cliff, not a crossing: PDD stays ahead until its plans run out, and the answer says so
(``break_even_*`` None, ``no_plan_beyond_*`` the edge) instead of calling the edge a break-even.
"""

from __future__ import annotations

import dataclasses
import time

from placer.baselines import compare, solve_baseline
from placer.errors import InputError, PlacerError
from placer.pdd import MD
from placer.optimize import SolveConfig, optimize
from placer.plan import Plan
from placer.problem import Problem

BRACKET_STEPS = 4  # doublings (or halvings) of v while looking for a sign change
MAX_BISECTIONS = 6
REL_TOL = 0.02
PER_SOLVE_S = 20.0


def price_chip_of(plan: Plan) -> str | None:
    """The chip of the PDD plan's MD pools (most MD chips first): "GPU-B" of the report."""
    chips: dict[str, int] = {}
    for p in plan.pools:
        if p.role == MD and p.count > 0:
            chips[p.chip] = chips.get(p.chip, 0) + p.count * p.tp
    return max(chips, key=chips.get) if chips else None


def _line_of(problem: Problem, plan: Plan) -> tuple[str, str] | None:
    """The line the PDD plan uses most (else the scenario's first line)."""
    used = [(u.gbit_per_s_used, u.src, u.dst) for u in plan.links if u.gbit_per_s_used > 0]
    if used:
        _, s, d = max(used)
        return (s, d)
    return next(iter(sorted(problem.links)), None)


def _with_price(problem: Problem, chip: str, usd_per_h: float) -> Problem:
    chips = {**problem.chips, chip: dataclasses.replace(problem.chips[chip], price_usd_per_h=usd_per_h)}
    return dataclasses.replace(problem, chips=chips)


def _with_bandwidth(problem: Problem, line: tuple[str, str], gbit_per_s: float) -> Problem:
    links = dict(problem.links)
    s, d = line
    for key in ((s, d), (d, s)):
        if key in links:
            links[key] = dataclasses.replace(links[key], gbit_per_s=gbit_per_s)
    return dataclasses.replace(problem, links=links)


def _bcr(solve) -> float | None:
    """The BCR of ``solve()``'s plan; None when there is none."""
    try:
        return solve().metrics.bcr_requests_per_usd
    except PlacerError:
        return None


def _minus(bcr: float | None, base: float) -> float | None:
    return None if bcr is None else bcr - base


class _Search:
    """Bracket and bisect d(v) = 0 from v0, counting re-solves."""

    def __init__(self, diff, v0: float, d0: float, up_when_ahead: bool):
        self.diff, self.v0, self.d0, self.resolves = diff, v0, d0, 0
        # where d shrinks: PDD ahead (d0 > 0) → move the way that hurts PDD
        self.up = up_when_ahead if d0 > 0 else not up_when_ahead

    def _d(self, v: float) -> float | None:
        self.resolves += 1
        return self.diff(v)

    @staticmethod
    def _same_side(d: float | None, d_lo: float) -> bool:
        """Whether d (None: PDD has no plan — behind) is on d_lo's side of 0."""
        return d is not None and d != 0 and (d > 0) == (d_lo > 0)

    def run(self) -> tuple[float | None, float, bool]:
        """(break-even v or None, the farthest v searched, whether the far end had no PDD plan)."""
        lo, d_lo, hi, hi_none = self.v0, self.d0, None, False
        v = self.v0
        for _ in range(BRACKET_STEPS):
            v = v * 2 if self.up else v / 2
            d = self._d(v)
            if not self._same_side(d, d_lo):
                hi, hi_none = v, d is None
                break
            lo, d_lo = v, d
        if hi is None:
            return None, v, False
        for _ in range(MAX_BISECTIONS):
            if abs(hi - lo) <= REL_TOL * max(abs(lo), abs(hi)):
                break
            mid = (lo + hi) / 2
            d = self._d(mid)
            if self._same_side(d, d_lo):
                lo, d_lo = mid, d
            else:
                hi, hi_none = mid, d is None
        return (lo + hi) / 2, v, hi_none and d_lo > 0


def against_words(same_dc: Plan | None) -> str:
    """The same-dc-pd plan the answers measure against: ``same-dc-pd's plan within the inventory``,
    with ``, serving 4.96 of 10 req/s (PDD: the whole load)`` when it carries less than the load."""
    if same_dc is None:
        return "same-dc-pd (no plan)"
    m = same_dc.metrics
    part = (f", serving {m.served_rps:.2f} of {m.offered_rps:g} req/s at its best BCR (PDD: the whole load)"
            if m.offered_rps > 0 and m.served_rps < 0.999 * m.offered_rps else "")
    return f"same-dc-pd's plan within the inventory{part}"


def _sentence(what: str, unit: str, now: float, at: float | None, farthest: float, ahead: bool,
              against: str) -> str:
    if at is None:  # the question names the plan and its load; a "none" answer names the plan too
        side = "ahead of" if ahead else "behind"
        return f"none: PDD stays {side} {against} for {what} from {now:.3g} to {farthest:.3g} {unit}"
    return f"{at:.3g} {unit} (today {now:.3g} {unit}: PDD is {'ahead' if ahead else 'behind'})"


def break_even(problem: Problem, pdd: Plan, same_dc: Plan | None, config: SolveConfig = SolveConfig(),
               price_chip: str | None = None, per_solve_s: float = PER_SOLVE_S) -> dict:
    """The break-even GPU-B price and line bandwidth (see the module docstring)."""
    solve = config.but(objective="bcr", marginals=False, time_limit_s=min(per_solve_s, config.time_limit_s))
    base_now = same_dc.metrics.bcr_requests_per_usd if same_dc is not None else 0.0
    pdd_now = pdd.metrics.bcr_requests_per_usd
    d0 = pdd_now - base_now
    against = against_words(same_dc)
    plan_words = against.split(", serving")[0]  # the answers name the plan; the question also its load
    out = {}
    chip = price_chip or price_chip_of(pdd)
    if chip is not None:
        start = time.perf_counter()

        baseline_uses_chip = same_dc is not None and any(p.chip == chip for p in same_dc.pools)

        def price_diff(v: float) -> float:
            p = _with_price(problem, chip, v)
            base = _bcr(lambda: solve_baseline(p, "same-dc-pd", solve)) if baseline_uses_chip else base_now
            pdd_bcr = _bcr(lambda: optimize(p, solve))
            if base is None:  # the baseline has no plan there: PDD ahead if it has one
                return None if pdd_bcr is None else pdd_bcr
            return _minus(pdd_bcr, base)

        now = problem.chips[chip].price_usd_per_h
        search = _Search(price_diff, now, d0, up_when_ahead=True)
        at, far, _ = search.run()
        out["price"] = {"chip": chip, "now_usd_per_h": now, "break_even_usd_per_h": at,
                        "question": f"{chip} price at which PDD's BCR equals that of {against}",
                        "against": against,
                        "answer": _sentence(f"a {chip} price", "USD/h", now, at, far, d0 > 0, plan_words),
                        "resolves": search.resolves, "seconds": time.perf_counter() - start}
    line = _line_of(problem, pdd)
    if line is not None:
        start = time.perf_counter()

        def bw_diff(v: float) -> float | None:
            return _minus(_bcr(lambda: optimize(_with_bandwidth(problem, line, v), solve)), base_now)

        now = problem.links[line].gbit_per_s
        search = _Search(bw_diff, now, d0, up_when_ahead=False)
        at, far, cliff = search.run()
        name = f"{line[0]}<->{line[1]}"
        answer = _sentence(f"line {name}", "Gbit/s", now, at, far, d0 > 0, plan_words)
        if cliff:
            answer = (f"none: PDD stays ahead of {plan_words} down to {at:.3g} Gbit/s on line {name} (today "
                      f"{now:.3g} Gbit/s); thinner than that it has no plan meeting the SLA")
        out["bandwidth"] = {"line": name, "now_gbit_per_s": now, "break_even_gbit_per_s": None if cliff else at,
                            "no_plan_beyond_gbit_per_s": at if cliff else None,
                            "question": f"line {name} bandwidth at which PDD's BCR equals that of {against}",
                            "against": against,
                            "answer": answer, "resolves": search.resolves, "seconds": time.perf_counter() - start}
    return out


def compare_with_break_even(problem: Problem, config: SolveConfig = SolveConfig(), price_chip: str | None = None,
                            per_solve_s: float = PER_SOLVE_S) -> dict:
    """:func:`placer.baselines.compare` plus ``"break_even"``: the answers against same-dc-pd
    (``{"error": ...}`` when that baseline has no plan)."""
    if price_chip is not None and price_chip not in problem.chips:
        raise InputError(f"--price-chip: unknown chip {price_chip!r}; scenario knows {', '.join(sorted(problem.chips))}")
    result = compare(problem, config)
    same_dc = result["baselines"].get("same-dc-pd")
    if not isinstance(same_dc, Plan):
        result["break_even"] = {"error": "same-dc-pd has no plan to break even with"}
        return result
    result["break_even"] = break_even(problem, result["pdd"], same_dc, config, price_chip, per_solve_s)
    return result
