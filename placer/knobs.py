"""Scenario knobs for ``placer frontier``: one scenario or problem per value of the knob varied.

in:  a Scenario (or the Problem resolved from it), a knob name, a value
out: the scenario with that one figure changed (:func:`variant`) — every other figure as given

Knobs (:data:`KNOBS`):

* ``ttft`` / ``tpot`` — the TTFT P90 / TPOT SLA, seconds;
* ``price`` — GPU-B's price as a multiple of GPU-A's (``B price = value × A price``): GPU-A is
  the chip the first datacenter holds most of (the prefill side), GPU-B the chip another
  datacenter holds most of (the decode side); :func:`chip_pair`, or given;
* ``gbit`` — every WAN line's bandwidth, Gbit/s (both directions);
* ``hit`` — the mean prefix hit rate of the mix: every class's *miss* rate (1 − hit) is scaled by
  the same factor, so the histogram keeps its shape (the low-hit tail stays the tail) while its
  mean moves to ``value`` (``placer sweep --vary hit-mean``'s rule);
* ``load`` — the offered load, req/s (``workload.arrival_rps``): a model much heavier than the
  scenario's cannot carry its load on the inventory, so a model map often wants a load per model;
* ``model`` — a catalog model name (a categorical knob: ``values`` are names): MLA with small KV
  (DeepSeek-V3, Kimi-K2) against GQA (Qwen3, Llama), MoE against dense, DSA (DeepSeek-V3.2).

A bad value is an InputError naming the knob and the value, raised before any solve.
"""

from __future__ import annotations

import dataclasses
import math

from placer.errors import InputError
from placer.problem import Problem
from placer.specs import Scenario

SLA_KNOBS = ("ttft", "tpot")
#: knobs changed in the Problem after resolving (cheap: nothing derived from them is cached)
PROBLEM_KNOBS = ("price", "gbit")
SCENARIO_KNOBS = (*SLA_KNOBS, "hit", "load", "model")
KNOBS = (*SLA_KNOBS, "price", "gbit", "hit", "load", "model")
LABELS = {"ttft": "TTFT P90 SLA (s)", "tpot": "TPOT SLA (s)", "price": "GPU-B price / GPU-A price",
          "gbit": "WAN line bandwidth (Gbit/s)", "hit": "mean prefix hit rate of the mix",
          "load": "offered load (req/s)", "model": "model"}


def check_knob(knob: str) -> str:
    if knob not in KNOBS:
        raise InputError(f"--vary: unknown {knob!r}; choose one of {', '.join(KNOBS)}")
    return knob


def check_value(knob: str, value) -> None:
    """InputError naming the knob when ``value`` is not a value it takes."""
    check_knob(knob)
    if knob == "model":
        from placer.catalog import model_catalog  # noqa: PLC0415 (catalog read only for this knob)

        if not isinstance(value, str) or value not in model_catalog():
            raise InputError(f"--values: model {value!r} is not in the catalog; known: "
                             f"{', '.join(sorted(model_catalog()))}")
        return
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise InputError(f"--values: each {knob} value must be a finite number > 0, got {value!r}")
    if knob == "hit" and not value < 1:
        raise InputError(f"--values: a mean hit rate must be in (0, 1), got {value!r}")


def mean_hit_rate(scenario: Scenario) -> float | None:
    """The share-weighted mean hit rate of the scenario's classes (None for a trace without classes)."""
    classes = scenario.workload.classes if scenario.workload else None
    if not classes:
        return None
    total = sum(c.share for c in classes)
    return sum(c.share * c.hit_rate for c in classes) / total


def with_mean_hit(scenario: Scenario, target: float) -> Scenario:
    """Every class's miss rate scaled by one factor so the mix's mean hit is ``target``
    (``placer sweep --vary hit-mean``'s rule: :func:`placer.sim.sweep.variant`)."""
    from placer.sim.sweep import variant as sweep_variant  # noqa: PLC0415

    if mean_hit_rate(scenario) is None:
        raise InputError(f"--vary hit: scenario {scenario.name!r} has no workload classes to shift (a trace "
                         "is bucketed at resolve time; give classes)")
    return sweep_variant(scenario, "hit-mean", target)


def scenario_variant(scenario: Scenario, knob: str, value) -> Scenario:
    """``scenario`` with a scenario-level knob (:data:`SCENARIO_KNOBS`) set to ``value``; unchanged
    for the problem-level ones (:func:`problem_variant` applies those)."""
    check_value(knob, value)
    if knob in SLA_KNOBS:
        field = "ttft_p90_s" if knob == "ttft" else "tpot_s"
        return scenario.model_copy(update={"sla": scenario.sla.model_copy(update={field: float(value)})})
    if knob == "hit":
        return with_mean_hit(scenario, float(value))
    if knob == "load":
        if scenario.workload is None:
            raise InputError(f"--vary load: scenario {scenario.name!r} has no workload")
        return scenario.model_copy(update={"workload": scenario.workload.model_copy(
            update={"arrival_rps": float(value)})})
    if knob == "model":
        return scenario.model_copy(update={"model": value})
    return scenario


def chip_pair(problem: Problem, given: tuple[str, str] | None = None) -> tuple[str, str]:
    """(GPU-A, GPU-B): the chip the first datacenter holds most of, and the chip another datacenter
    holds most of that differs from it; ``given`` is checked against the scenario's chips."""
    if given is not None:
        for c in given:
            if c not in problem.chips:
                raise InputError(f"--chips: unknown chip {c!r}; scenario knows {', '.join(sorted(problem.chips))}")
        return given
    first = problem.datacenters[0]
    a = max(first.inventory, key=first.inventory.get, default=None) if first.inventory else None
    held: dict[str, int] = {}
    for dc in problem.datacenters[1:]:
        for chip, n in dc.inventory.items():
            if chip != a:
                held[chip] = held.get(chip, 0) + n
    if a is None or not held:
        raise InputError(f"--vary price: scenario {problem.name!r} needs a chip in its first datacenter and a "
                         "different chip in another (GPU-A and GPU-B); name them with --chips A,B")
    return a, max(held, key=held.get)


def problem_variant(problem: Problem, knob: str, value, pair: tuple[str, str] | None = None) -> Problem:
    """``problem`` with a problem-level knob (:data:`PROBLEM_KNOBS`) set; unchanged for the others."""
    if knob == "price":
        a, b = chip_pair(problem, pair)
        price = float(value) * problem.chips[a].price_usd_per_h
        chips = {**problem.chips, b: dataclasses.replace(problem.chips[b], price_usd_per_h=price)}
        return dataclasses.replace(problem, chips=chips)
    if knob == "gbit":
        links = {k: dataclasses.replace(v, gbit_per_s=float(value)) for k, v in problem.links.items()}
        return dataclasses.replace(problem, links=links)
    return problem


def variant(scenario: Scenario, knob: str, value, pair: tuple[str, str] | None = None) -> Problem:
    """The Problem of ``scenario`` with ``knob`` set to ``value`` (scenario- or problem-level)."""
    from placer.problem import resolve  # noqa: PLC0415

    return problem_variant(resolve(scenario_variant(scenario, knob, value)), knob, value, pair)
