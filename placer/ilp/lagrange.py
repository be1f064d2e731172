r"""A Lagrangian bound on F(λ) = max goodput − λ·cost with every site's counts whole (issue 47).

in:  a built :class:`~placer.ilp.formulation.Formulation` (its decode covers, C18, too), λ, a time limit
out: :func:`site_bound` — an upper bound on F(λ) valid for every plan, or None where it has none in time;
     :class:`Beside` — the ratio's ceiling from it, computed in a child beside a proving round's MILP

Why: the LP relaxation buys decoders in fractions (0.01-0.75 of an instance) at every site that prefills, where a plan
buys whole ones; that is an economic choice, not a capacity limit, so no cut valid for every plan sees it, and the
proving round's root bound on 16 sites × 12 classes stood at ~10.6 req/s against the 0.96 its proof needs. Here each
datacenter is a block: its pools' counts (whole), queues, the flows its P pools prefill (whatever their decoder's
site), the relayed flows' line columns it sends, and its decoders with their z. A row whose columns all lie in one
block stays in it; the rows that couple blocks are dualised:

* the demand (C1), SLA (C11) and cover (C18) rows, whose columns span every site, whole, each at its multiplier μ_r
  (≥ 0 on a ≤ row, ≤ 0 on a ≥ row of the maximisation, free on =);
* a decode split (C5) at site d, which joins d's decoders to the flows of other sites that decode there, is split:
  the flows from elsewhere become one column w_r of d's block, bounded by what those flows may carry at most (the
  bounds every plan's rows imply, :func:`implied_upper`), and only w_r = Σ (their flows) is dualised. d's decoders
  stay tied to d's own flows, so a block that keeps its load at home buys its decoders whole.

For any μ of those signs, L(μ) = Σ_r μ_r·rhs_r + Σ_blocks max over the block's rows, whole counts
(goodput − λ·cost − Σ_r μ_r·row_r) ≥ F(λ): every plan is in every block and its dualised terms are ≥ 0 — weak
duality, whatever μ. The blocks are small MILPs (a site's ~20 counts and ~1,300 columns on 16 × 12); each block's
value is its MILP's proven bound, so a block stopped short of optimal still gives a valid L. μ comes from the LP
relaxation's duals (with the covers), where L with the blocks relaxed equals the LP bound, so L(μ_LP) lies between
F(λ) and the LP bound; then each next μ is the duals of Dantzig-Wolfe's master (each block a convex combination of the
solutions it gave so far, and of the last plan's part) kept within a box around the best μ so far. The least L over
them is the bound: on 16 × 12 at λ* 10.59 (the LP's) -> 10.48 at μ_LP, 6.7 after 4 steps, 4.8 after 15 (3.8 after 25, box 0.3)
— the whole decoders' share of the LP's looseness; a proof at 1 % there needs 0.96, which sites as blocks do not reach.
"""

from __future__ import annotations

import math
import multiprocessing
import re
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass, field

from placer.ilp.backends import solve
from placer.ilp.highs import solve_lp_duals
from placer.ilp.model import LinearModel
from placer.ilp.starts import ROUND_FIRST_INTEGERS, _ceiling

#: Multipliers tried after the LP's duals (each solves every block once): each the master's duals within a box around the
#: best so far (the master's own swing wildly while it has few columns), BOX of each one's size plus BOX_FLOOR, widened by
#: GROW (to BOX_MAX) where L fell, narrowed by SHRINK where not. On 16 sites × 12 classes at λ* = 283.56 req/USD (LP
#: 10.59 req/s), 15 steps: a fixed box of 0.3 4.10 (172 at its first step), of 0.1 4.79; 0.1 growing by 1.5 4.56 (its
#: first four 26.0, 8.8, 8.0, 7.2); this 4.76, its first four 9.6, 8.4, 7.5, 6.7 — the steps a short proof has time for.
STEPS = 20
BOX, BOX_MAX, GROW, SHRINK = 0.02, 0.5, 2.0, 0.5
BOX_FLOOR = 1e-3
#: The share of a proving round's MILP time after which :class:`Beside` starts the sites' bound beside it (a MILP that
#: proves sooner never starts it: the examples' take a few seconds).
BESIDE_DELAY = 0.25
#: A block's MILP gaps (relative; absolute, req/s): the blocks' slack adds up in L.
BLOCK_GAP = 1e-4
BLOCK_ABS_GAP = 0.01
#: Blocks solved at once (threads: HiGHS releases the GIL).
WORKERS = 2


@dataclass
class _Dualised:
    """A dualised row: Σ coeffs·v (sense) rhs over the extended columns (the model's, then the w's)."""

    coeffs: dict[int, float]
    sense: str
    rhs: float
    row: int  # the row of the LP whose dual prices it
    split: bool  # w_r = Σ (the other sites' columns): priced at minus the home row's dual


@dataclass
class _Blocks:
    """The model cut into sites: each block's columns (extended indices) and its own rows; the dualised rows."""

    lb: list[float]
    ub: list[float]
    integer: list[bool]
    columns: dict[str | None, list[int]] = field(default_factory=dict)
    rows: dict[str | None, list[tuple[dict[int, float], str, float]]] = field(default_factory=dict)
    dualised: list[_Dualised] = field(default_factory=list)


def var_sites(form) -> list[str | None]:
    """Each column's datacenter: a pool's count, queue shares and decode rates its own; a flow its P pool's, a line
    column its source's; a column the maps do not name, the first datacenter its name gives; G none (global)."""
    model = form.model
    site: list[str | None] = [None] * len(model.vars)
    for key, v in form.n.items():
        site[v] = key[1]
    for pool, v in form.tier.items():
        site[v] = pool.dc
    for f, v in form.columns.x.items():
        site[v] = f.p.dc
    for (_, p), v in form.columns.relay_in.items():
        site[v] = p.dc
    for (_, s, _), v in form.columns.relay_out.items():
        site[v] = s
    for key, v in form.z.items():
        site[v] = key[3].dc
    names = {dc.name for dc in form.problem.datacenters}
    for v in model.vars:
        if site[v.index] is None and v.index != form.g:
            site[v.index] = next((t for t in re.split(r"[\[\],]|->", v.name) if t in names), None)
    return site


def implied_upper(model: LinearModel, rows: list, passes: int = 2) -> list[float]:
    """Upper bounds on the columns that every solution of ``rows`` keeps (a row's other columns at their least
    contribution), e.g. a flow ≤ its class's share of G's bound from (C1); the columns' own where tighter."""
    lb = [v.lb for v in model.vars]
    ub = [v.ub for v in model.vars]
    for _ in range(passes):
        for row in rows:
            for sign in ((1.0,) if row.sense == "<=" else (-1.0,) if row.sense == ">=" else (1.0, -1.0)):
                least = [(i, sign * a, sign * a * (lb[i] if sign * a > 0 else ub[i])) for i, a in row.coeffs.items()]
                total = sum(m for _, _, m in least)
                if not math.isfinite(total):
                    continue
                for i, a, m in least:
                    if a > 0:
                        ub[i] = min(ub[i], max(lb[i], (sign * row.rhs - (total - m)) / a))
    return ub


def decompose(form, rows: list) -> _Blocks:
    """``form``'s model with ``rows`` (its rows and the covers) cut into sites (module docstring)."""
    model = form.model
    site = var_sites(form)
    ub = implied_upper(model, rows)
    out = _Blocks([v.lb for v in model.vars], ub, [v.integer for v in model.vars])
    names = {dc.name for dc in form.problem.datacenters}
    for j, row in enumerate(rows):
        sites = {site[i] for i in row.coeffs}
        if len(sites) == 1:
            out.rows.setdefault(sites.pop(), []).append((dict(row.coeffs), row.sense, row.rhs))
            continue
        home = next((t for t in re.split(r"[\[\],]|->", row.name) if t in names and t in sites), None)
        other = {i: a for i, a in row.coeffs.items() if site[i] != home}
        low = sum(a * (out.lb[i] if a > 0 else out.ub[i]) for i, a in other.items())
        high = sum(a * (out.ub[i] if a > 0 else out.lb[i]) for i, a in other.items())
        if home is None or not (math.isfinite(low) and math.isfinite(high)):
            out.dualised.append(_Dualised(dict(row.coeffs), row.sense, row.rhs, j, False))
            continue
        w = len(out.lb)  # the other sites' part of the row, a column of the home block
        out.lb.append(low)
        out.ub.append(high)
        out.integer.append(False)
        site.append(home)
        kept = {i: a for i, a in row.coeffs.items() if site[i] == home}
        kept[w] = 1.0
        out.rows.setdefault(home, []).append((kept, row.sense, row.rhs))
        out.dualised.append(_Dualised({w: 1.0, **{i: -a for i, a in other.items()}}, "==", 0.0, j, True))
    for i, s in enumerate(site):
        out.columns.setdefault(s, []).append(i)
    return out


def _signed(sense: str, dual: float) -> float:
    """A dual moved onto the sign weak duality needs in a maximisation: ≥ 0 on a ≤ row, ≤ 0 on a ≥ row, free on =. (A
    split row's w is priced at minus its home row's dual: in the LP with w, w's reduced cost 0 = home dual + its own.)"""
    if sense == "==":
        return dual
    return max(0.0, dual) if sense == "<=" else min(0.0, dual)


def _block_model(blocks: _Blocks, cols: list[int], relax: bool) -> tuple[LinearModel, dict[int, int]]:
    m = LinearModel()
    local = {}
    for i in cols:
        local[i] = m.var(f"v{i}", blocks.lb[i], blocks.ub[i], blocks.integer[i] and not relax)
    return m, local


@dataclass
class Bound:
    """L(μ) and what it came from."""

    value: float  # the best (least) L over the multipliers tried; inf when none gave one
    lp: float  # the LP relaxation's value (the bound L is to beat)
    seconds: float
    steps: int
    values: list[float] = field(default_factory=list)  # L at each multiplier tried
    inner: float = -math.inf  # the master's last value (the least L lies between it and ``value``)


def site_bound(form, objective: dict[int, float], time_limit_s: float, plan: list[float] | None = None,
               steps: int = STEPS, relax: bool = False, on_value: Callable[[float], None] | None = None) -> Bound | None:
    """An upper bound on max ``objective`` (goodput − λ·cost) over ``form``'s plans: the least L(μ) over the LP
    relaxation's duals and ``steps`` more multipliers, each the duals of the Dantzig-Wolfe master (every block a convex
    combination of its solutions so far, ``plan`` among them: a plan keeps every dualised row, so the master has one),
    whose value converges to the least L; None where the LP or a block gives nothing within ``time_limit_s``.
    ``relax``: the blocks as LPs (L(μ_LP) is then the LP bound: a check); ``on_value`` hears each better L."""
    start = time.perf_counter()
    model = form.model
    held = {id(r) for r in model.rows}
    rows = list(model.rows) + [r for r in form.covers if id(r) not in held]  # (C18) once, in the model or not
    lp = model.relaxed()
    lp.rows = rows
    lp.maximize, lp.objective = True, dict(objective)
    res, duals = solve_lp_duals(lp, time_limit_s)
    if not duals:
        return None
    blocks = decompose(form, rows)
    mus = [_signed(d.sense, -duals[d.row] if d.split else duals[d.row]) for d in blocks.dualised]
    built = {s: _block_model(blocks, cols, relax) for s, cols in blocks.columns.items()}
    for s, (m, local) in built.items():
        for coeffs, sense, rhs in blocks.rows.get(s, []):
            m.add(f"r{len(m.rows)}", "block", {local[i]: a for i, a in coeffs.items()}, sense, rhs)
    master = _Master(blocks, objective)
    if plan is not None:
        master.add(_extended(blocks, plan))
    out, box = Bound(math.inf, res.objective, 0.0, 0), BOX
    for step in range(steps + 1):
        left = time_limit_s - (time.perf_counter() - start)
        value, solution = _evaluate(blocks, built, objective, mus, left)
        if value is None:
            break
        out.values.append(value)
        if value < out.value:  # a serious step: the box's centre moves there and widens
            out.value, out.steps, center, box = value, step, mus, min(BOX_MAX, GROW * box) if step else BOX
            if on_value is not None:
                on_value(value)
        else:
            box *= SHRINK
        master.add(solution)
        if step == steps:
            break
        priced = master.duals(center, box, time_limit_s - (time.perf_counter() - start))
        if priced is None:
            break
        mus, out.inner = priced
        if box >= BOX_MAX and out.value - out.inner <= BLOCK_ABS_GAP * len(built):
            break  # no multiplier within the widest box does better on the blocks' solutions so far
    out.seconds = time.perf_counter() - start
    return out if out.values else None


def _extended(blocks: _Blocks, plan: list[float]) -> list[float]:
    """A plan's values over the extended columns: each split row's w its other sites' part."""
    values = list(plan) + [0.0] * (len(blocks.lb) - len(plan))
    for d in blocks.dualised:
        if d.split:
            w = next(i for i, a in d.coeffs.items() if i >= len(plan))
            values[w] = -sum(a * plan[i] for i, a in d.coeffs.items() if i != w)
    return values


class _Master:
    """Dantzig-Wolfe's master LP: each block a convex combination of its solutions so far (its columns), the dualised
    rows over them; its rows' duals price the next blocks (the sign rule of :func:`_signed` holds at its optimum)."""

    def __init__(self, blocks: _Blocks, objective: dict[int, float]) -> None:
        self.blocks, self.objective = blocks, objective
        self.columns: list[tuple[str | None, float, dict[int, float]]] = []

    def add(self, solution: list[float]) -> None:
        """Every block's part of ``solution`` as a column: its objective and its share of each dualised row."""
        for s, cols in self.blocks.columns.items():
            part = {i: solution[i] for i in cols if solution[i] != 0.0}
            value = sum(self.objective.get(i, 0.0) * x for i, x in part.items())
            rows = {}
            for r, d in enumerate(self.blocks.dualised):
                a = sum(c * part[i] for i, c in d.coeffs.items() if i in part)
                if a != 0.0:
                    rows[r] = a
            self.columns.append((s, value, rows))

    def duals(self, center: list[float], box: float, left_s: float) -> tuple[list[float], float] | None:
        """The dualised rows' duals at the master's optimum, each kept within ``box`` (a share of its size, plus
        BOX_FLOOR) of ``center`` (the best multipliers so far: a row may be broken at a price outside the box, so the
        master always has a solution), and the master's value."""
        m = LinearModel()
        for j, (s, value, _) in enumerate(self.columns):
            m.var(f"c{j}", 0.0, 1.0)
        m.maximize, m.objective = True, {j: value for j, (_, value, _) in enumerate(self.columns) if value}
        by_row: dict[int, dict[int, float]] = {}
        for j, (_, _, rows) in enumerate(self.columns):
            for r, a in rows.items():
                by_row.setdefault(r, {})[j] = a
        for r, d in enumerate(self.blocks.dualised):
            width = box * abs(center[r]) + BOX_FLOOR
            under, over = m.var(f"u{r}"), m.var(f"o{r}")  # the row's dual then lies in [center - width, center + width]
            m.objective[under], m.objective[over] = center[r] - width, -(center[r] + width)
            m.add(f"d{r}", "dualised", {**by_row.get(r, {}), under: 1.0, over: -1.0}, d.sense, d.rhs)
        for s in self.blocks.columns:
            m.add(f"one{s}", "convexity", {j: 1.0 for j, col in enumerate(self.columns) if col[0] == s}, "==", 1.0)
        res, duals = solve_lp_duals(m, left_s)
        if not duals:
            return None
        n = len(self.blocks.dualised)
        return [_signed(d.sense, y) for d, y in zip(self.blocks.dualised, duals[:n])], res.objective


def _evaluate(blocks: _Blocks, built: dict, objective: dict[int, float], mus: list[float],
              left_s: float) -> tuple[float | None, list[float]]:
    """L(μ) and the blocks' solutions (extended columns); None when a block gives no bound in time."""
    coef = [0.0] * len(blocks.lb)
    for i, c in objective.items():
        coef[i] += c
    value = 0.0
    for d, mu in zip(blocks.dualised, mus):
        value += mu * d.rhs
        for i, a in d.coeffs.items():
            coef[i] -= mu * a
    solution = [0.0] * len(blocks.lb)
    deadline = time.perf_counter() + left_s

    def one(item):
        m, local = item
        m.maximize, m.objective = True, {k: coef[i] for i, k in local.items() if coef[i] != 0.0}
        if not m.objective:  # nothing to gain or lose: every column at 0 (each block's rows hold there)
            return None
        return solve(m, "ortools", deadline - time.perf_counter(), mip_gap=BLOCK_GAP, abs_gap=BLOCK_ABS_GAP,
                     restarts=False)

    with ThreadPoolExecutor(WORKERS) as pool:  # HiGHS leaves the GIL: the blocks run side by side
        results = list(pool.map(one, built.values()))
    for (m, local), res in zip(built.values(), results):
        if res is None:
            continue
        if not res.status.has_solution or res.bound != res.bound:
            return None, solution
        value += res.bound
        for i, k in local.items():
            solution[i] = res.values[k]
    return value, solution


def applies(form) -> bool:
    """Whether a proving round of ``form`` may run :class:`Beside`: not a fleet's model (its blocks are not
    mapped here) nor a large one (ROUND_FIRST_INTEGERS: 100 sites × 12 classes' LP with its duals alone ran past
    5 minutes on 2 loaded cores; the local-first plan's path holds there, :mod:`placer.ilp.local_first`)."""
    return not getattr(form, "members", None) and sum(v.integer for v in form.model.vars) < ROUND_FIRST_INTEGERS


class Beside:
    """:func:`site_bound` at λ in a forked child beside a proving round's MILP (HiGHS holds the GIL: a thread waits),
    from ``delay_s`` on (a MILP that proves sooner ends it unstarted: the examples' take a few seconds), each better
    ceiling sent as it comes; :meth:`ceiling` reads the last and ends the child. None of it where no fork may be made."""

    def __init__(self, form, config, lam: float, plan: list[float], least_cost: float, floor: float,
                 delay_s: float) -> None:
        self.proc = None
        if "fork" not in multiprocessing.get_all_start_methods() or multiprocessing.current_process().daemon:
            return
        ctx = multiprocessing.get_context("fork")
        self.recv, send = ctx.Pipe(duplex=False)
        args = (send, form, config, lam, plan, least_cost, floor, delay_s)
        self.proc = ctx.Process(target=_beside, args=args, daemon=True)
        self.proc.start()
        send.close()

    def ceiling(self, wait_s: float = 0.0) -> float:
        """The lowest ceiling the child sent (inf without one), after at most ``wait_s`` for it to finish; the child
        ended."""
        out = math.inf
        if self.proc is None:
            return out
        self.proc.join(wait_s)
        try:
            while self.recv.poll(0):
                out = min(out, self.recv.recv())
        except EOFError:
            pass
        finally:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join()
            self.recv.close()
        return out


def _beside(send, form, config, lam: float, plan: list[float], least_cost: float, floor: float, delay_s: float) -> None:
    """:class:`Beside`'s child: wait ``delay_s``, then send each better ceiling."""
    time.sleep(delay_s)
    if config.left_s() <= 0:
        return
    objective = dict(form.goodput)
    for i, c in form.cost.items():
        objective[i] = objective.get(i, 0.0) - lam * c
    site_bound(form, objective, config.left_s(), plan=plan,
               on_value=lambda value: send.send(_ceiling(lam, value, least_cost, floor)))
