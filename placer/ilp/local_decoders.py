"""Local decoder rows: a datacenter whose prefill or line carries requests to be decoded there has a decoder there
(issue 47).

in:  the model after (C3), (C8) and (C9) (the P capacity rows, the link rows, the pools' counts n), the problem and
     its prepared flows and columns
out: :func:`local_decoders`: (C19) — rows every plan keeps, which the LP relaxation's fractional decoders do not, not
     yet in the model (:func:`placer.ilp.formulation.build` keeps them aside, ``Formulation.local``);
     :func:`take_local_decoders`: those the LP relaxation at the model's objective breaks, into the model (the proving
     rounds of :mod:`placer.ilp.dinkelbach`)

Why: the proof of a fleet plan is the gap between the LP relaxation and whole instances, and on generated fleets
that gap is the decoders'. On 16 sites × 12 classes (``bench/scale_scenarios.py``, 65 K-token prompts) the LP
prefills on whole-looking P pools (3.97 tp32 where the plan has 3) and decodes beside them on 0.08-0.26 of a tp32
per site, where a plan needs a whole tp16 or two tp8 at each: with the decoders fixed at the plan's counts the LP's
bound falls from F = 8.94 to below 0 (the proof needs 0), with the P counts fixed only to 5.65. Two facts every plan
keeps bound that:

* (P side) a request prefilled in datacenter d on a pipeline that decodes it there — P-MD and P-D within d, and
  P-RLD-MD and P-RLD, whose RLD is always P's datacenter — needs a decoder of that role in d. Its prefill takes
  pre[k,p]/(κ_p·u_p) of a P queue's instances ((C3)), and the chip's P instances in d take at most its inventory
  ((C0), (C9)). So the share of chip c's inventory in d busy with such requests,

      Σ_{P queues p of chip c in d} Σ_{f from p, decoded by role r in d} pre[k,p]·tp_p/(κ_p·u_p·inventory[d][c]) · x_f,

  is at most 1, and 0 without a role-r decoder in d: it is at most Σ_{q of role r in d} n_q, whole.
* (line side) every request over the line s→d is decoded in d (P-MD and P-RLD-MD on MD, P-D on D), so the line's
  busy share ((C8): its row over its right-hand side) is at most the count of MD and D instances in d.

Measured on 16 × 12 at 1.01 × its plan's ratio (λ' = 287.9 req/USD): 64 P-side and 36 line rows take the LP's bound
on F from 8.94 to 6.48; HiGHS proves F(λ') ≤ 0 in 23-28 s against 41 s without them.

Where they go (the LP is where they cost: a row that cuts nothing still widens every LP of a proof — sixteen-dc's
proving MILP took 7.3 s with its 116 rows against 4.7 s without, and with them in its least-cost LP the seed's
sites moved: pdd-two-dc's solve 0.36 -> 1.13 s, sixteen-dc's 7.4 -> 12.3 s):

* a model under ``round_settings.CUTOFF_INTEGERS`` integer columns gets none: its MILPs prove exactly in well under
  a second, their root bound is not what they wait on;
* from :data:`ALL_ROWS_INTEGERS` up (100 sites × 12 classes) every row is in every proving round, and in the
  least-cost LP only where it gives the bound of a plan in hand (``bound_only``: 288.8 -> 279.2 req/USD, one LP of
  29 -> 38 s, none to spare for a second);
* in between, :func:`in_least_cost`: the least-cost LP is solved as before; only where the rows it breaks are short
  of a whole decoder or more in all (:data:`SHORT_DECODERS`) is it solved again with them, and they stay only where
  they raise its least cost by TARGET_GAP (1 %) or more — else what they change is within what the proof must
  certify anyway. With them in, the least cost rises pdd-two-dc 0.31 % (under CUTOFF_INTEGERS), eight-dc 0.03 %,
  sixteen-dc 0.06 % (both short of under half a decoder: not solved again); 8 × 6 4.8 %, 16 × 12 3.1 %, 32 × 12
  3.1 % (kept). Kept, they are in that LP (the seed's sites and the bound), and the proving rounds take those their
  LP at λ breaks (:func:`take_local_decoders`, up to :data:`SEPARATION_ROUNDS` LPs: 16 × 12 19 rows, F 8.90 -> 6.44,
  as with all 100);
* a solve from a plan or a ratio, which runs no least-cost LP to judge them, goes without them under
  :data:`ALL_ROWS_INTEGERS` (:func:`unjudged`).

A first plan is rounded from the least-cost LP without them (``Formulation.plain_lp``; the no-lines model of
:mod:`placer.ilp.local_first` is built without them): from the LP with them 100 × 12's no-lines model rounded to no
plan in 21 s (197.1 req/USD in 2.7 s without), and 32 × 12's whole model to none (185.3 without).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from placer.ilp.backends import solve
from placer.ilp.columns import Columns
from placer.ilp.data import Prepared
from placer.ilp.model import LinearModel, Row
from placer.ilp.round_settings import CUTOFF_INTEGERS, TARGET_GAP
from placer.pdd import D, MD, P, P_D, P_MD, P_RLD, P_RLD_MD, RLD
from placer.problem import Problem

if TYPE_CHECKING:  # placer.ilp.formulation imports this module to build the rows
    from placer.ilp.formulation import Formulation

#: the rows' family
FAMILY = "local_decoder"
#: LP relaxations solved to find the rows it breaks (the third adds the last on 16 × 12: 11, 7, 1 rows)
SEPARATION_ROUNDS = 3
#: models with this many integer columns or more take every row, unseparated (``starts.ROUND_FIRST_INTEGERS``)
ALL_ROWS_INTEGERS = 1000
#: decoders the least-cost LP must be short of, summed over the rows it breaks, before it is solved again with them:
#: eight-dc 0.17, sixteen-dc 0.45 (its second LP, 1 s of an 8-s solve, moved the least cost 0.06 %); 8 × 6 5.3,
#: 16 × 12 4.0, 32 × 12 11.3
SHORT_DECODERS = 1.0
#: how far below 0 a row's slack marks it broken
TOLERANCE = 1e-6
#: the decoder role a P-side flow of each pipeline needs in P's datacenter (P-MD and P-D only when they stay there)
_LOCAL = {P_MD: MD, P_D: D, P_RLD_MD: RLD, P_RLD: RLD}


def local_decoders(m: LinearModel, problem: Problem, data: Prepared, cols: Columns, n: dict) -> list[Row]:
    """(C19): the P-side rows for every (datacenter, P chip, decoder role) and the line rows, not added to ``m``."""
    counts: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)  # (role, dc) -> {n var: -1}
    for key, var in n.items():
        if key.role in (MD, D, RLD):
            counts[key.role, key.datacenter][var] = -1.0
    return _p_side(problem, data, cols, counts) + _line_side(m, problem, counts)


def _p_side(problem: Problem, data: Prepared, cols: Columns, counts: dict) -> list[Row]:
    busy: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)  # (dc, chip, role) -> {P-side column: share}
    for f in data.flows:
        role = _LOCAL.get(f.pipeline)
        if role is None or f.p.role != P or (role in (MD, D) and f.crosses) or not counts.get((role, f.src)):
            continue
        inventory = problem.dc(f.src).inventory.get(f.p.chip, 0)
        capacity = f.p.util * problem.pool_capacity.get(f.p.key, 1.0)
        pre = data.prefill.get((f.k, f.p))
        if inventory <= 0 or capacity <= 0 or pre is None:
            continue
        busy[f.src, f.p.chip, role][cols.p_side(f)] = pre * f.p.tp / (capacity * inventory)
    return [Row(f"{FAMILY}[{dc},{chip},{role}]", FAMILY, {**shares, **counts[role, dc]}, "<=", 0.0)
            for (dc, chip, role), shares in sorted(busy.items())]


def _line_side(m: LinearModel, problem: Problem, counts: dict) -> list[Row]:
    links = {row.name: row for row in m.rows if row.family == "link"}  # named by formulation._add_links
    added: list[Row] = []
    for s, d in sorted(problem.links):
        row = links.get(f"link[{s}->{d}]")
        decoders = {**counts.get((MD, d), {}), **counts.get((D, d), {})}
        if row is None or row.rhs <= 0 or not decoders:
            continue
        added.append(Row(f"{FAMILY}[{s}->{d}]", FAMILY, {**{i: c / row.rhs for i, c in row.coeffs.items()},
                                                         **decoders}, "<=", 0.0))
    return added


def take_local_decoders(form: Formulation, limit_s: float, left_s: Callable[[], float] = lambda: math.inf) -> int:
    """Put into ``form.model`` the (C19) rows of ``form.local`` its LP relaxation at the model's objective breaks (up
    to :data:`SEPARATION_ROUNDS` LPs, each within ``limit_s`` and what ``left_s()`` says is left of the budget),
    every one on a model of :data:`ALL_ROWS_INTEGERS` integer columns or more; returns how many. Rows not taken stay
    aside for a later round, unless the last LP broke none of them (then they are dropped: one LP, not one a round,
    where they cut nothing).

    An LP starts only with at least the time this model's last one took left (``Formulation.separation_s``, first the
    least-cost LP's: :func:`in_least_cost`): HiGHS notices a short limit late (10 datacenters × 20 classes: 1.0-1.4 s
    on a 0.1-s limit), and three such rounds ran 3.3 s past ``--time-limit``; one that cannot finish in time gives
    nothing."""
    m = form.model
    if not form.local:
        return 0
    if m.integer_columns() >= ALL_ROWS_INTEGERS:
        taken, form.local = form.local, []
        m.rows.extend(taken)
        return len(taken)
    count = 0
    for _ in range(SEPARATION_ROUNDS):
        left = left_s()
        if left <= 0 or left < form.separation_s:
            break
        res = solve(m.relaxed(), "ortools", min(limit_s, left))
        form.separation_s = res.seconds
        if not res.status.has_solution:
            break
        broken = [i for i, row in enumerate(form.local) if row.slack(res.values) < -TOLERANCE]
        if not broken:  # its LP at this λ holds the rest: later rounds, at a λ within the gap of it, go without them
            form.local = []
            break
        m.rows.extend(form.local[i] for i in broken)
        gone = set(broken)
        form.local = [row for i, row in enumerate(form.local) if i not in gone]
        count += len(broken)
    return count


def in_least_cost(form: Formulation, relaxed: LinearModel, solve_lp: Callable, cost: Callable, bound_only: bool = False):
    """The least-cost LP relaxation ``relaxed`` solved by ``solve_lp()`` with (C19) where they matter (the module's
    docstring says where); ``cost(result)`` its plan's USD/h. Sets ``form.local`` to the rows kept (none: dropped).
    ``bound_only``: the LP gives a bound, not the solution a first plan is rounded from."""
    integers = form.model.integer_columns()
    if integers < CUTOFF_INTEGERS:
        form.local = []
    if not form.local:
        return solve_lp()
    if integers >= ALL_ROWS_INTEGERS:
        if bound_only:
            relaxed.rows.extend(form.local)
        return solve_lp()
    without = solve_lp()
    short = sum(max(0.0, -row.slack(without.values)) for row in form.local) if without.status.has_solution else 0.0
    if short < SHORT_DECODERS:
        form.local = []
        return without
    relaxed.rows.extend(form.local)
    with_rows = solve_lp()
    if not with_rows.status.has_solution or cost(with_rows) < (1 + TARGET_GAP) * cost(without):
        form.local = []  # they move the least cost by less than the proof certifies
        return without
    form.plain_lp = without.values  # a first plan is rounded from it (32 x 12: 185.3 req/USD; from theirs, none)
    form.separation_s = without.seconds  # the proving rounds' LPs are this one with the few rows they break
    return with_rows


def unjudged(form: Formulation) -> None:
    """A solve that starts from a plan or a ratio (a marginal value's re-solve, a replanning job) runs no least-cost LP
    (:func:`in_least_cost`) to judge the rows by: under :data:`ALL_ROWS_INTEGERS` it goes without them (sixteen-dc's two
    marginal-value re-solves took 20.3 -> 26.2 s with every row their LP broke, 22.6 s judged by that LP as the
    least-cost one is; eight-dc's 2.6 -> 3.4 s)."""
    if form.model.integer_columns() < ALL_ROWS_INTEGERS:
        form.local = []
