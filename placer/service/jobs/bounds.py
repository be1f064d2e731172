"""The service's bound on a scenario's size: what a client may make the server build and solve.

in:  a validated :class:`~placer.specs.Scenario` (posted to ``/scenarios``, ``/plans``, ``/compare``,
     or a replanning job's with its fitted workload)
out: nothing, or :class:`~placer.errors.InputError` (HTTP 422) naming the field, its size and the limit

The MILP has a flow per (request class, prefill queue, destination): a prefill pool of each chip and
instance shape in a datacenter, each with its utilisation tiers, sends every class to its own
datacenter and every datacenter a WAN line reaches. The flows, and with them the build's time and
memory, grow as classes × Σ over datacenters of (chips there × (1 + its lines)) × tp degrees ×
instance shapes — the **routes** counted here (one route is ~2.5 flows after the tiers and
pipelines). Measured on full meshes of the hardening generator (4 classes, two chips, tp [8, 16],
three shapes): 30 datacenters are 43,200 routes, 105k flows, 0.54 GB and no plan within a 20 s
limit; 100 are 480,000 routes (1.7 GB, 83 s with a 15 s limit before the build had deadlines);
200 took 6.7 GB and 241 s inside the server. :data:`MAX_ROUTES` admits the 30-datacenter mesh
(two workers: ~1 GB together) and every example scenario five times over (sixteen-dc: 9,720).

The CLI has no such bound: a user's own machine may solve what it likes (``--time-limit`` bounds the
time there). The bound is the service's, checked in :func:`placer.service.jobs.solve.check_scenario`.
"""

from __future__ import annotations

from collections import Counter

from placer.errors import InputError
from placer.specs import Scenario

#: At most this many datacenters (a clear first answer for a mesh far over :data:`MAX_ROUTES`).
MAX_DATACENTERS = 100
#: At most this many request classes, summed over a fleet's models (each multiplies the flows).
MAX_CLASSES = 200
#: At most this many routes (classes × Σ_dc chips × (1 + lines) × tp degrees × shapes): see above.
MAX_ROUTES = 50_000
#: Classes counted for a workload given as a trace (fitted on the server; the fit's bins are few).
TRACE_CLASSES = 8


def _classes(scenario: Scenario) -> int:
    members = scenario.models if scenario.is_fleet else [scenario]
    return sum(len(m.workload.classes) if m.workload.classes else TRACE_CLASSES for m in members)


def routes(scenario: Scenario) -> int:
    """classes × Σ over datacenters of (chip kinds stocked × (1 + WAN lines with capacity)) × tp
    degrees × instance shapes: what the MILP's flows grow with."""
    lines: Counter[str] = Counter()
    for link in scenario.links:
        if link.gbit_per_s > 0:
            lines[link.src] += 1
            lines[link.dst] += 1
    sites = sum(sum(1 for n in dc.inventory.values() if n > 0) * (1 + lines[dc.name]) for dc in scenario.datacenters)
    options = scenario.options
    return _classes(scenario) * sites * len(options.tp_degrees) * len(options.shape_kinds)


def check_size(scenario: Scenario) -> None:
    """InputError (422) when the scenario is bigger than the service solves."""
    n = len(scenario.datacenters)
    if n > MAX_DATACENTERS:
        raise InputError(f"datacenters: {n} datacenters, over the service's limit of {MAX_DATACENTERS} (the MILP "
                         f"grows with their square on a mesh); solve it with the placer CLI on your own machine")
    classes = _classes(scenario)
    if classes > MAX_CLASSES:
        raise InputError(f"workload.classes: {classes} request classes, over the service's limit of {MAX_CLASSES}; "
                         "merge similar classes, or solve it with the placer CLI")
    count = routes(scenario)
    if count > MAX_ROUTES:
        raise InputError(
            f"links: the scenario has {count:,} routes (classes × Σ over datacenters of chips × (1 + WAN lines) × "
            f"tp_degrees × instance shapes), over the service's limit of {MAX_ROUTES:,}; fewer lines per "
            "datacenter, classes, tp_degrees or options.instance_shapes make it smaller, or solve it with the "
            "placer CLI on your own machine")
