"""Chips faster or slower than the model says (issue 42 part 5: robustness to model error).

in:  a :class:`~placer.problem.Problem`, a plan, a fraction X (0.2 = ±20 %)
out: :func:`with_speed` / :func:`derated` — the problem with chips whose compute and memory rates
     are scaled (per chip); :func:`speed_cases` — the sets of factors to try; :func:`perturbed_runs`
     — the plan simulated at each (:class:`~placer.plan.Perturbed` rows).

What is scaled: each chip's datasheet peaks (``bf16_tflops``, ``fp8_tflops``, ``fp4_tflops`` and
``mem_bw_tbps``) through :meth:`~placer.catalog.Chip.with_changes`, so every prefill (compute-bound)
and decode (memory-bound) time the performance model derives from them moves by the factor, while
price, memory size, power and the network do not. A chip whose pools answer from a measured
latency table inside its grid (``profiles:``) keeps the table's figures: the perturbation is a
question about the roofline model's error.

Which cases (:func:`speed_cases`): the pools and routes of a given plan are fixed, so each request's
TTFT can only grow when a chip slows; the extremes of P90 over the box [1 − X, 1 + X] per chip lie at
its corners. Up to :data:`MAX_CORNER_CHIPS` chip types every corner is simulated (at most 8 runs);
beyond, the two extreme corners (all slow, all fast) and :data:`DRAWS` fixed-seed draws, each chip
uniform in the box, independently.
"""

from __future__ import annotations

import dataclasses
import itertools
import random

from placer.errors import InputError
from placer.plan import Perturbed, Plan

#: The chip fields whose values are rates (scaled together: a chip "X slower").
RATE_FIELDS = ("bf16_tflops", "fp8_tflops", "fp4_tflops", "mem_bw_tbps")
#: Every corner of the box is simulated up to this many chip types (2**3 = 8 runs).
MAX_CORNER_CHIPS = 3
#: Fixed-seed draws beside the two extreme corners when the plan has more chip types.
DRAWS = 6
SEED = 42
#: Largest fraction a perturbation or a slowdown may be.
MAX_FRACTION = 0.9


def check_fraction(name: str, value: float) -> float:
    """``value`` when it is a fraction in [0, :data:`MAX_FRACTION`], else InputError naming ``name``."""
    if not 0 <= value <= MAX_FRACTION:
        raise InputError(f"{name}: must be between 0 and {MAX_FRACTION:g} (a fraction of chip speed), got {value:g}")
    return value


def with_speed(problem, factors: dict[str, float]):
    """``problem`` with each named chip's compute and memory rates multiplied by its factor."""
    chips = dict(problem.chips)
    for name, factor in factors.items():
        chip = chips[name]
        chips[name] = chip.with_changes(**{f: getattr(chip, f) * factor for f in RATE_FIELDS
                                           if getattr(chip, f) is not None})
    return dataclasses.replace(problem, chips=chips)


def derated(problem, slowdown: float):
    """``problem`` with every chip of its datacenters' inventories ``slowdown`` slower (rates × (1 − X))."""
    check_fraction("robust", slowdown)
    used = sorted({chip for dc in problem.datacenters for chip in dc.inventory})
    return with_speed(problem, {chip: 1 - slowdown for chip in used})


def plan_chips(plan: Plan) -> list[str]:
    return sorted({p.chip for p in plan.pools if p.count > 0})


def speed_cases(chips: list[str], fraction: float, extremes_only: bool = False) -> list[dict[str, float]]:
    """The sets of per-chip factors to simulate (module docstring): the box's corners, all slow
    first; with ``extremes_only`` just all slow and all fast."""
    slow, fast = 1 - fraction, 1 + fraction
    if extremes_only or len(chips) > MAX_CORNER_CHIPS:
        cases = [dict.fromkeys(chips, slow), dict.fromkeys(chips, fast)]
        if not extremes_only:
            rng = random.Random(SEED)
            cases += [{c: rng.uniform(slow, fast) for c in chips} for _ in range(DRAWS)]
        return cases
    return [dict(zip(chips, combo)) for combo in itertools.product((slow, fast), repeat=len(chips))]


def perturbed_runs(problem, plan: Plan, fraction: float, sim_config, extremes_only: bool = False) -> list[Perturbed]:
    """``plan`` simulated at each of :func:`speed_cases` (pools and routes as planned)."""
    from placer.sim.engine import simulate  # the simulator is loaded only when a perturbation runs

    check_fraction("perturb", fraction)
    runs = []
    for factors in speed_cases(plan_chips(plan), fraction, extremes_only):
        d = simulate(with_speed(problem, factors), plan, sim_config).data
        runs.append(Perturbed(speed_factors={c: round(f, 4) for c, f in factors.items()}, ttft_p90_s=d["ttft_p90_s"],
                              ttft_p99_s=d["ttft_p99_s"], sla_attainment=d["sla_attainment"],
                              goodput_rps=d["goodput_rps"], bcr_requests_per_usd=d["bcr_requests_per_usd"],
                              requests=d["requests"]))
    return runs


def spread_words(runs: list[Perturbed], fraction: float) -> str:
    """One line: the range of simulated P90, attainment and BCR over the perturbed runs."""
    if not runs:
        return ""

    def span(values, fmt):
        return f"{fmt(min(values))} – {fmt(max(values))}"

    return (f"chips ±{100 * fraction:g} % ({len(runs)} cases): simulated TTFT P90 "
            f"{span([r.ttft_p90_s for r in runs], lambda v: f'{v:.3f}')} s, attainment "
            f"{span([r.sla_attainment for r in runs], lambda v: f'{100 * v:.1f}')} %, BCR "
            f"{span([r.bcr_requests_per_usd for r in runs], lambda v: f'{v:.2f}')} req/USD")
