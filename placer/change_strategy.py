"""Make- or break-before-make: the one rule by which a plan change is applied, live and in simulation.

in:  what the instances a change adds need, what is free while the old plan still runs, and what the
     instances the change removes hold — each a mapping resource → amount, keyed as the caller counts
     (the executor: Ray's ``dc:NAME`` and ``chip:NAME`` resources, ``executor.elastic.choose_strategy``;
     the simulator: chips per (datacenter, chip), ``placer.replan.fleets.fits_beside``)
out: :class:`StrategyChoice`: make-before-break when the free resources hold the added instances, else
     break-before-make; ``still_short`` names what even the leaving instances' resources do not cover
     (the executor refuses such a change; a planner's plan within the inventory never has one)

Base layer: standard library only (the executor imports it; tests/test_layers.py's rules). Each caller
keeps its own data adapter — this module knows no plan, no instance spec and no Ray.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MAKE_BEFORE_BREAK = "make-before-break"
BREAK_BEFORE_MAKE = "break-before-make"
#: Amounts closer than this count as equal (Ray reports fractional resources as floats).
EPS = 1e-9


def total(parts: Iterable[Mapping]) -> dict:
    """The sum of several resource mappings, key by key."""
    out: dict = {}
    for part in parts:
        for key, value in part.items():
            out[key] = out.get(key, 0) + value
    return out


def shortfall(need: Mapping, have: Mapping) -> dict:
    """What ``need`` asks beyond ``have``, key by key (empty: ``have`` holds it)."""
    return {k: v - have.get(k, 0) for k, v in need.items() if v > have.get(k, 0) + EPS}


@dataclass(frozen=True)
class StrategyChoice:
    """How a change is applied, and what was short while the old plan runs."""

    strategy: str
    short: dict = field(default_factory=dict)  # what the free resources lack for the added instances
    still_short: dict = field(default_factory=dict)  # what even the leaving instances' resources lack

    @property
    def feasible(self) -> bool:
        return not self.still_short


def choose_strategy(need: Mapping, free: Mapping | None, leaving: Mapping) -> StrategyChoice:
    """Make-before-break when ``free`` holds ``need`` (or ``free`` is None: resources not accounted),
    else break-before-make — the leaving instances stop first and their resources count as free."""
    if free is None:
        return StrategyChoice(MAKE_BEFORE_BREAK)
    short = shortfall(need, free)
    if not short:
        return StrategyChoice(MAKE_BEFORE_BREAK)
    return StrategyChoice(BREAK_BEFORE_MAKE, short, shortfall(short, leaving))
