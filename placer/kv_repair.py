"""A plan whose own evaluation finds its decoders waiting for KV, re-solved with less load on them (issue 42).

in:  the Problem, the plan ``optimize`` solved (its metrics say whether it meets the SLA), ``optimize``'s own
     solve, the command's started config
out: :func:`repair` — the plan to keep with the problem it was solved at, or the same plan when it meets the
     SLA, no decoder waits for KV, the budget is spent or no cut helps (those two said in a note: :data:`NOTE`,
     :func:`ran_out_of_time`)

The MILP's KV row ((C7), :class:`placer.kv_admission.KvHeadroom`) is linear: tangent to the occupancy
quantile at a reference mix. A pool to which the plan routes a few long contexts holds fewer, larger
footprints than that mix, so its occupancy spreads more than the tangent says and the evaluation's KV-wait law
(:mod:`placer.kv_wait`, :class:`placer.decode_state.DecodeState`'s ``kv_wait``) finds many arrivals waiting
for room. rnd-7-12-relay (``bench/bench_agreement.py --random 40 --seed 7``): an H20 tp1 MD pool holding the
46K-token class, 51 % of its arrivals waiting 17.7 s, the plan's P90 23.0 s against a 1.15 s SLA (the simulator
4.3 s: it misses too); the same optimum holds a plan with tp2 decoders at 0.38 s — the MILP's ratio cannot tell
them apart. When a plan misses the SLA and pools wait for KV on :data:`KV_WAIT_SHARE` or more of their arrivals,
those pools' capacity rows are cut (``Problem.pool_capacity``, as ``optimize --verify``'s cuts,
:mod:`placer.cuts`) by :data:`CUT` per round, at most :data:`ROUNDS` rounds within the command's one deadline;
the first plan that meets the SLA is kept, with a note naming the cuts, else the first plan stands (its miss
said as before) with a note that says why the repair stopped: out of rounds, or out of the command's time —
rnd-31-5 (bench/data/rnd-31-5.yaml; ``bench/bench_agreement.py --random 6 --seed 31 --only 5``) meets its SLA after
one re-solve of ~8 s, which a 16-s ``--time-limit`` leaves no room for; the command then says a longer limit may
find a plan, not only "add capacity" (the simulator agrees the first plan misses: its MD dc0 decoders 94 % full, a
third of their arrivals waiting 7.3 s).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from placer.decode_state import KV_WAIT_NOTE_SHARE
from placer.errors import PlacerError
from placer.evaluate import analyze
from placer.ilp.config import SolveConfig
from placer.plan import Plan
from placer.problem import Problem

#: A pool is cut when at least this share of its arrivals waits for KV room (the evaluation's note's threshold).
KV_WAIT_SHARE = KV_WAIT_NOTE_SHARE
#: The factor on a waiting pool's capacity rows per round (compounded over rounds).
CUT = 0.85
#: Every note of the repair starts so (the plan's ``notes``).
NOTE = "KV repair (placer.kv_repair): "
#: How the note of a repair that ran out of the command's time goes on after :data:`NOTE`.
OUT_OF_TIME = "out of time"
#: Re-solves at most.
ROUNDS = 3
#: A re-solve starts only with at least this many seconds of the command's budget left.
MIN_RESOLVE_S = 2.0


def waiting_pools(problem: Problem, plan: Plan) -> dict[tuple, float]:
    """(role, datacenter, chip, tp) → the share of its arrivals that wait for KV, for the pools at or over
    :data:`KV_WAIT_SHARE`."""
    decode = analyze(problem, plan).decode
    return {tuple(key): st.kv_wait for key, st in decode.items() if st.busy and st.kv_wait >= KV_WAIT_SHARE}


def repair(problem: Problem, solved: tuple, solve: Callable[[Problem, SolveConfig], tuple],
           config: SolveConfig) -> tuple[tuple, Problem]:
    """((plan, formulation, outcome), problem) to keep (module docstring); ``solve(problem, config)`` →
    (plan, formulation, outcome) with the plan's metrics."""
    plan = solved[0]
    if plan.metrics.sla_met is not False:
        return solved, problem
    waiting = waiting_pools(problem, plan)
    if not waiting:
        return solved, problem
    cuts: dict[tuple, float] = dict(problem.pool_capacity)
    first = waiting
    resolves = 0
    for _ in range(ROUNDS):
        if config.left_s() < MIN_RESOLVE_S:
            break
        for key in waiting:
            cuts[key] = cuts.get(key, 1.0) * CUT
        cut = dataclasses.replace(problem, pool_capacity=dict(cuts))
        try:
            again = solve(cut, config)
        except PlacerError:  # no plan under the cuts (or out of time): the first plan stands
            break
        resolves += 1
        if again[0].metrics.sla_met:
            return (_noted(again[0], plan, cuts, first), *again[1:]), cut
        waiting = waiting_pools(cut, again[0]) or waiting
    waits = f"decoders wait for KV room ({_shares(first)} of their arrivals); "
    tried = (f"{resolves} re-solve{'' if resolves == 1 else 's'} with their capacity cut did not meet the SLA" if resolves
             else "no re-solve with their capacity cut found a plan")
    stopped = (f"{OUT_OF_TIME}: {waits}{tried} within the time limit; a longer --time-limit may find a plan that "
               "meets it" if resolves < ROUNDS and config.left_s() < MIN_RESOLVE_S else f"{waits}{tried}")
    return (plan.model_copy(update={"notes": [*plan.notes, NOTE + stopped]}), *solved[1:]), problem


def ran_out_of_time(plan: Plan) -> bool:
    """Whether ``plan`` is a first plan the repair had no time to mend (its note says so)."""
    return any(n.startswith(NOTE + OUT_OF_TIME) for n in plan.notes)


def _shares(waiting: dict[tuple, float]) -> str:
    return ", ".join(f"{r} {dc} {chip} tp{tp} {100 * w:.0f} %" for (r, dc, chip, tp), w in sorted(waiting.items(),
                                                                                                key=str))


def _noted(plan: Plan, first: Plan, cuts: dict[tuple, float], waiting: dict[tuple, float]) -> Plan:
    cut = ", ".join(f"{r} {dc} {chip} tp{tp} ×{f:.2f}" for (r, dc, chip, tp), f in sorted(cuts.items(), key=str))
    note = (f"{NOTE}the first plan missed the SLA (TTFT P90 {first.metrics.ttft_p90_s:.2f} s) with decoders waiting "
            f"for KV room ({_shares(waiting)} of their arrivals); re-solved with their capacity cut ({cut})")
    return plan.model_copy(update={"notes": [*plan.notes, note]})
