"""A trace scenario's plan priced at what its own routing leaves the far decoders holding (issue 42).

in:  a :class:`~placer.problem.Problem` with a trace (:attr:`~placer.problem.Problem.trace`), a function that
     solves a problem within a config (``optimize``'s own solve), the command's started config
out: :func:`settle` — the last round's (plan, formulation, outcome), the problem with the hits its routing leaves
     (the plan's metrics taken there) and that round's config, and a note: how many solves, each line's
     planned Gbit/s before (the first round, at the hits it was priced at and at what its routing left the
     decoders holding) and after; :func:`lp_hits` — the hits the first solve is priced at

The planner prices a crossing route's KV as what the destination's decoders lack
(:meth:`placer.problem.Problem.decode_hit`). With drawn classes they hold what P's prefix store holds. On a
trace a conversation's turns climb the hit bands, so a plan that routes classes by hit decodes one
conversation's turns in different datacenters, and each decoder holds only the turns decoded there
(:mod:`placer.workload.decode_hits`; rnd-7-4-trace: the classes hit-80-90 … hit-95-97 crossing dc1→dc0 at
P's 0.85–0.96 while dc0's decoders held 0.28–0.40 of their prompts, the line at 21.0 Gbit/s of 17.9 where
the plan counted 15.2). What the decoders hold depends on the routing the plan chooses, so the plan is
solved, the trace routed as it splits each class, and the problem re-solved at the hits that routing leaves
(:func:`placer.workload.decode_hits.held_hits`) until the lines' loads settle: the plan's lines at the hits
its own routing leaves within :data:`SETTLED_SHARE` of each line's Gbit/s of what it was priced at, at
most :data:`MAX_ROUNDS` solves. The solves draw on the command's one deadline
(``--time-limit`` bounds the whole command, docs/contracts.md): the first has the whole budget (a solve that
split it in halves found no plan in its first half on rnd-7-9-trace at 20 s, and a plan 12 % from the optimum
on rnd-7-4), a re-solve what is left of it, none with under :data:`MIN_RESOLVE_S` left — then the last plan
stands, its metrics taken at the hits its own routing leaves (an overloaded line shows in its promise), and the
note says the rounds stopped for time.

So the first solve is often the only one (rnd-7-19-trace: its MILP takes the whole budget at 20 s and at
60 s), and it is priced where the rounds would settle on the LP relaxation (:func:`lp_hits`), not at P's hit:
the relaxation's least-cost routing, the trace routed as it splits each class, re-priced until its lines
settle (2–3 LPs, 4 s there). A destination that routing decodes nothing at holds nothing of any class (its
decoders saw none of the earlier turns), so a plan that opens it counts the whole prompt on its line until a
round prices what the plan's own routing leaves there. P's hit there was the optimistic end: rnd-7-19's only
solve counted dc1→dc2 at 11.9 Gbit/s of 14 where its routing left 23.6 (the simulator offered 28: the far
MD's cache fills only as KV lands, late on an overloaded line), RLD held its relays for the line and 69 % of
the planned requests were late.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from placer.errors import SolveTimeoutError
from placer.evaluate import flows_gbit, line_gbit
from placer.ilp.backends import solve as solve_lp
from placer.ilp.config import SolveConfig
from placer.ilp.formulation import build, pdd_architecture
from placer.plan import Plan
from placer.problem import Problem
from placer.workload.decode_hits import held_hits, routed_hits
from placer.workload.trace import read_trace

#: Solves at most: the plan at the hits of :func:`lp_hits`, then at most two re-solves at the hits the last
#: plan's routing left.
MAX_ROUNDS = 3
#: The lines' loads have settled when none moved more than this share of its Gbit/s between what the plan
#: was priced at and what its own routing leaves.
SETTLED_SHARE = 0.02
#: A re-solve starts only with at least this many seconds of the command's budget left.
MIN_RESOLVE_S = 2.0
#: LP relaxations at most that settle the first solve's hits (:func:`lp_hits`), each at most LP_LIMIT_S and
#: none once less than LP_BUDGET_SHARE of the command's budget would be left for the MILP.
MAX_LP_ROUNDS = 3
LP_LIMIT_S = 10.0
LP_BUDGET_SHARE = 0.7


def wanted(problem: Problem) -> bool:
    """Whether ``problem``'s plan is worth routing its trace for: a trace workload, the decode-side cache (without
    it every route sends whole prompts) and a line to price, and no decode-side hits given already."""
    return (problem.trace is not None and bool(problem.options.drc) and not problem.decode_hits
            and any(link.gbit_per_s > 0 for link in problem.links.values()))


def _settled(problem: Problem, planned: dict, held: dict) -> bool:
    return all(abs(held.get(key, 0.0) - planned.get(key, 0.0)) <= SETTLED_SHARE * problem.links[key].gbit_per_s
               for key in set(planned) | set(held))


def lp_hits(problem: Problem, config: SolveConfig) -> dict[tuple[str, str], float]:
    """The decode-side hits (:attr:`Problem.decode_hits`) the first solve is priced at: those the LP
    relaxation's own routing leaves, settled (module docstring). Each round builds the MILP at the last hits,
    solves its least-cost relaxation, routes the trace as that solution splits each class and prices every
    destination at what its decoders hold then — nothing where that routing decodes nothing — until the
    lines' loads move under SETTLED_SHARE of their Gbit/s; empty where no LP solved in time."""
    arch, records, hits = pdd_architecture(problem), list(read_trace(problem.trace)), {}
    started = config.left_s()
    for _ in range(MAX_LP_ROUNDS):
        if config.left_s() < LP_BUDGET_SHARE * started:
            break
        priced = dataclasses.replace(problem, decode_hits=hits)
        form = build(priced, arch, "bcr")
        relaxed = form.model.relaxed()
        relaxed.maximize, relaxed.objective = False, dict(form.cost)
        result = solve_lp(relaxed, "ortools", min(LP_LIMIT_S, config.left_s() - LP_BUDGET_SHARE * started))
        if not result.status.has_solution:
            break
        rps: dict[str, dict[str, float]] = {}
        for f, x in form.rates(result.values).items():
            if x > 1e-9:
                split = rps.setdefault(problem.classes[f.k].name, {})
                split[f.dst] = split.get(f.dst, 0.0) + x
        shares = {k: {d: x / sum(v.values()) for d, x in v.items()} for k, v in rps.items()}
        new = {(c.name, d): 0.0 for c in problem.classes for d in problem.dc_names}
        new.update(routed_hits(problem, records, shares))
        before = _lp_line_gbit(priced, form, result.values)
        after = _lp_line_gbit(dataclasses.replace(problem, decode_hits=new), form, result.values)
        hits = new
        if _settled(problem, before, after):
            break
    return hits


def _lp_line_gbit(problem: Problem, form, values: list[float]) -> dict[tuple[str, str], float]:
    """Gbit/s of KV on each line of a relaxed solution's flows, each request's at ``problem``'s hits."""
    return flows_gbit(problem, ((problem.classes[f.k], f.pipeline, f.src, f.dst, x)
                                for f, x in form.rates(values).items() if x > 1e-9 and (f.src, f.dst) in problem.links))


def settle(problem: Problem, solve: Callable[[Problem, SolveConfig], tuple], config: SolveConfig,
           finish: Callable[[Problem, Plan], Plan],
           first_hits: Callable[[Problem, SolveConfig], dict] | None = lp_hits
           ) -> tuple[tuple, Problem, SolveConfig]:
    """((plan, formulation, outcome), problem, config) of the last round (module docstring).
    ``solve(problem, config)`` → (plan, formulation, outcome); ``finish(problem, plan)`` → the plan with its
    metrics at ``problem`` (the last plan's are taken again at the hits its own routing leaves);
    ``first_hits(problem, config)`` → the hits the first solve is priced at (None: P's)."""
    cfg, first, rounds, timed_out = config.started(), None, 0, False
    priced = dataclasses.replace(problem, decode_hits=first_hits(problem, cfg)) if first_hits else problem
    while True:
        rounds += 1
        try:
            solved = solve(priced, cfg)
        except SolveTimeoutError:
            if rounds == 1:
                raise
            rounds, timed_out = rounds - 1, True  # no plan in what was left: the last round's stands
            break
        plan = solved[0]
        routed = dataclasses.replace(problem, decode_hits=held_hits(problem, plan))
        planned, held = line_gbit(priced, plan), line_gbit(routed, plan)
        first = first or (planned, held)
        if rounds == MAX_ROUNDS or _settled(problem, planned, held):
            break
        if cfg.left_s() < MIN_RESOLVE_S:
            timed_out = True
            break
        priced = routed
    plan = finish(routed, plan)
    note = _note(problem, rounds, first, line_gbit(routed, plan), timed_out)
    return (plan.model_copy(update={"notes": [*plan.notes, note]}), *solved[1:]), routed, cfg


def _note(problem: Problem, rounds: int, first: tuple[dict, dict], after: dict, timed_out: bool) -> str:
    planned, held = first
    lines = sorted(set(planned) | set(held) | set(after))
    text = "; ".join(f"{s}->{d} {planned.get((s, d), 0.0):.1f} Gbit/s as first priced, {held.get((s, d), 0.0):.1f} "
                     f"at the far decoders' -> {after.get((s, d), 0.0):.1f} of {problem.links[(s, d)].gbit_per_s:g}"
                     for s, d in lines)
    return (f"decode-side hits (trace routed as the plan splits each class, placer.workload.decode_hits): "
            f"{rounds} solve{'s' if rounds > 1 else ''}"
            f"{' (the time limit stopped the re-solves: the lines below are what this plan routes)' if timed_out else ''}"
            f"; lines {text or 'none crossed'}")
