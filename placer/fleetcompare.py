"""`placer compare` of a fleet: each model's share of the joint plan beside that model's baselines.

in:  a fleet scenario (``models:``) or :class:`~placer.problem.FleetProblem`, a
     :class:`~placer.ilp.config.SolveConfig`
out: ``{"fleet": joint plan, "models": {name: compare result}}``, each model's result shaped
     as :func:`placer.baselines.compare`'s (``pdd``, ``baselines``, ``scaled``), so every face
     that shows one comparison shows each model's.

Equal footing: a model's PDD row is its part of the joint plan (:func:`placer.fleet_links.split_with_links`,
with its own use of each line), and its baselines are solved on the hardware that plan leaves it —
each datacenter's inventory less the chips of the other models' pools, its power less theirs, and
each line less the Gbit/s their routes put on it. The break-even (GPU-B price, line bandwidth) is
a single-model question and is not asked for fleets.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from placer.baselines import compare
from placer.fleet_links import split_with_links
from placer.ilp.config import SolveConfig
from placer.optimize import as_fleet, optimize_fleet
from placer.plan import Plan
from placer.problem import FleetProblem, Problem
from placer.specs import Scenario


def left_for(problem: Problem, others: list[Plan]) -> Problem:
    """``problem`` on the hardware the ``others`` (the other models' plans, with links) leave."""
    chips: dict[tuple[str, str], int] = defaultdict(int)
    for plan in others:
        for p in plan.pools:
            chips[p.datacenter, p.chip] += p.count * int(p.tp)
    dcs = []
    for dc in problem.datacenters:
        inventory = {c: max(0, n - chips.get((dc.name, c), 0)) for c, n in dc.inventory.items()}
        power = dc.power_kw
        if power is not None:
            drawn = sum(n * problem.chips[c].tdp_w for (d, c), n in chips.items() if d == dc.name) / 1000
            power = max(0.0, power - drawn)
        dcs.append(dataclasses.replace(dc, inventory=inventory, power_kw=power))
    used: dict[tuple[str, str], float] = defaultdict(float)
    for plan in others:
        for line in plan.links:
            used[line.src, line.dst] += line.gbit_per_s_used
    links = {key: dataclasses.replace(link, gbit_per_s=max(1e-6, round(link.gbit_per_s - used.get(key, 0.0), 2)))
             for key, link in problem.links.items()}
    return dataclasses.replace(problem, datacenters=tuple(dcs), links=links)


def compare_fleet(scenario: Scenario | FleetProblem, config: SolveConfig = SolveConfig(),
                  measured: dict | None = None) -> dict:
    """The joint plan and, per model, :func:`placer.baselines.compare` against its share of it."""
    config = config.started()
    fleet = as_fleet(scenario, measured)
    joint = optimize_fleet(fleet, config.but(marginals=False))
    parts = split_with_links(joint, fleet)
    models = {}
    for name in fleet.names:
        others = [parts[o] for o in fleet.names if o != name]
        models[name] = compare(left_for(fleet.member(name), others), config, pdd=parts[name])
    return {"fleet": joint, "models": models}
