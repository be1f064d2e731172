"""Solve a built formulation for one objective; BCR exactly by Dinkelbach iterations.

in:  a :class:`~placer.ilp.formulation.Formulation`, objective, backend, time limit
out: :class:`Outcome` (values, status, gap, seconds, iterations) or a typed error:
     :class:`InfeasiblePlanError` (names what binds) / :class:`SolveTimeoutError`.

Dinkelbach for max goodput(x)/cost(n): start with λ = an upper bound from the LP
relaxation (the first MILP then yields a good feasible plan, whose ratio is the first λ
from below; with many pools that MILP and one round run on the pools of the LP's cheapest
sites, :func:`_restricted_seed`), a caller's warm-start ratio, or a caller's plan (``feasible_start``); solve
F(λ) = max goodput − λ·cost (a MILP, warm-started with the previous solution);
λ ← goodput/cost of the new solution; stop when F(λ) ≤ ε·λ·cost, or as soon as the
MILPs' proven bounds put the best ratio within TARGET_GAP (1 %) of the last plan's. λ increases
monotonically and converges superlinearly; each iteration is exact, so the last λ
is the optimal ratio (to the MIP gap). A final MILP picks, among plans at that
ratio, the one with the most goodput (no arbitrarily small plans).

A plan first (issue 47): on large models (ROUND_FIRST_INTEGERS) the LP's least-cost solution is
rounded to a plan (:mod:`placer.ilp.rounding`) before any MILP; it starts the iterations from below
(and hints the restricted seed), so a time limit returns at least it, with the LP ratio bound as its
certified gap, where the first MILP used to end without a plan (exit 4). Smaller models the restricted
seed leaves whole (a few sites: pdd-two-dc) round the LP too, as the seed MILP's starting plan
(:data:`ROUND_HINT`); the others round only when the restricted seed MILP ends without a plan. A restricted
round that ends on its time share unproven runs once more on the sites the LP opens at its ratio (:func:`_resited`).
A plan in hand on a model beyond proof (:data:`PROOF_NONZEROS`: 64 sites × 12 classes, 100 × 8, 100 × 12) gets no MILP
on the whole model: the LP relaxation's best ratio bounds it, the time left goes to the search
(:func:`placer.ilp.beyond_proof.searched_only`).
``Outcome.status`` is "optimal" only when the certified ratio gap is within TARGET_GAP, else "feasible"; ``config.progress`` (a
:class:`~placer.ilp.config.Progress` callback) hears the LP bound, the first plan and every round.
The starts (λ0 from the LP bound or a caller's ratio, a caller's plan, the rounded LP) are :mod:`placer.ilp.starts`,
the iterations' gaps, time shares and switches :mod:`placer.ilp.round_settings`.
"""

from __future__ import annotations

import math
import time

from placer.errors import InfeasiblePlanError, SolverError, SolveTimeoutError
from placer.ilp.backends import SolveResult, Status, solve
from placer.ilp.beyond_proof import searched_only
from placer.ilp.config import SolveConfig
from placer.ilp.covers import take_covers
from placer.ilp.diagnose import _max_carry, check_resolution, diagnose  # noqa: F401 - _max_carry: bench_agreement's
from placer.ilp.formulation import Formulation
from placer.ilp.local_decoders import take_local_decoders
from placer.ilp.outcome import Outcome
from placer.ilp.round_settings import (  # noqa: F401 - re-exported: tests and benches set them here
    ABS_GAP, CUTOFF_INTEGERS, LP_RATIO_SHARE, MAX_ITERATIONS, PROOF_NONZEROS, PROOF_SHARE, REL_GAP, RESITED_SHARE,
    RESTRICT_MIN_SHARE, RESTRICTED_ROUNDS, RESTRICTED_SHARE, ROUND_HINT, SEED_GAP, SMALL_SEED_SUB_MIPS, TARGET_GAP,
)
from placer.ilp.starts import (
    EPS, ROUND_FIRST_INTEGERS, ROUND_SHARE, ROUNDING_BACKEND, START_BACKEND, _bound_beside, _capacity_beside, _ceiling,
    _cost, _Dinkelbach, _f_objective, _feasible_start, _first_ratio, _goodput, _goodput_floor, _left_s, _lp_limit_s, _lp_sites,
    _on_sites, _report, _rounded_start,
)


def _check(result: SolveResult, form: Formulation, config: SolveConfig) -> None:
    """Every status without a plan as its typed error: NO_SOLUTION → SolveTimeoutError (exit 4),
    INFEASIBLE → InfeasiblePlanError naming the cause (exit 3), UNBOUNDED/ERROR → SolverError."""
    if result.status.has_solution:
        return
    if result.status is Status.NO_SOLUTION:
        raise SolveTimeoutError(config.time_limit_s)
    if result.status is Status.INFEASIBLE:
        raise InfeasiblePlanError(diagnose(form, _lp_limit_s(config)))
    raise SolverError(result.backend, result.status.value, result.seconds)


def _single_objective(form: Formulation, objective: str) -> tuple[bool, dict[int, float]]:
    """(maximise?, coefficients) of an objective solved by one MILP."""
    if objective == "min-cost":
        return False, dict(form.cost)
    if objective == "max-goodput":
        # tie-break toward the cheaper plan among those of equal goodput
        return True, {**{i: c for i, c in form.goodput.items()}, **{i: -1e-6 * c for i, c in form.cost.items()}}
    # max-served, for baselines that cannot meet the SLA: the most load carried at all
    return True, {form.g: 1.0, **{i: -1e-6 * c for i, c in form.cost.items()}}


def _solve_once(form: Formulation, config: SolveConfig, mip_gap: float, start: float) -> Outcome:
    """min-cost, max-goodput or max-served: one MILP."""
    model = form.model
    model.maximize, model.objective = _single_objective(form, config.objective)
    res = solve(model, config.backend, _left_s(config), mip_gap=mip_gap)
    _check(res, form, config)
    if config.objective == "max-goodput" and _goodput(form, res.values) <= EPS:
        raise InfeasiblePlanError(diagnose(form, _lp_limit_s(config)))
    return Outcome(res.values, res.status.value, res.gap, time.perf_counter() - start, res.backend, 1, math.nan)


def solve_objective(form: Formulation, config: SolveConfig, mip_gap: float = 1e-4,
                    warm_ratio: float | None = None, feasible_start: dict[str, float] | None = None) -> Outcome:
    """Solve ``form`` for ``config.objective`` in {"bcr", "min-cost", "max-goodput", "max-served"}.

    ``warm_ratio`` (bcr only): goodput per USD/h of a plan known to be feasible (e.g. the
    one deployed now, evaluated on the new workload); Dinkelbach starts from it.
    ``feasible_start`` (bcr only): a plan's values by variable name (names the model lacks are
    ignored, variables the plan lacks are 0), e.g. the plan a marginal-value re-solve loosens a
    row of. When it breaks no row of ``form``, Dinkelbach starts from it at its own ratio, from
    below, and skips the seed MILP; otherwise it is ignored.

    Every MILP and LP gets only what is left of ``config``'s budget (started here if the
    caller did not): out of time with a plan, the best plan so far comes back with status
    "feasible" and its gap; out of time without one, SolveTimeoutError.
    """
    start = time.perf_counter()
    config = config.started()
    check_resolution(form)
    if config.objective in ("min-cost", "max-goodput", "max-served"):
        return _solve_once(form, config, mip_gap, start)
    if config.objective != "bcr":
        raise ValueError(f"objective must be bcr, min-cost or max-goodput, got {config.objective!r}")
    # HiGHS restarts only for rounds from a known plan (placer.ilp.highs: they cost the cold rounds)
    restarts = warm_ratio is not None or feasible_start is not None
    seed = _feasible_start(form, feasible_start) if feasible_start else None
    if seed is not None:
        warm_ratio = seed.lam
    lam, from_above, least_cost, cheapest = _first_ratio(form, warm_ratio, config)
    upper = lam if from_above and warm_ratio is None else None  # the LP relaxation's bound on the ratio
    large = form.model.integer_columns() >= ROUND_FIRST_INTEGERS
    if seed is not None and large:  # a plan in hand (e.g. the local one, placer.ilp.local_first): its gap
        if (nonzeros := form.model.nonzeros(form.covers + form.local)) >= PROOF_NONZEROS:  # beyond proof: no MILP
            return searched_only(form, config, seed, *_capacity_beside(form, upper, least_cost), start, nonzeros)
        upper, least_cost = _bound_beside(form, config, upper, least_cost)
    _report(config, "lp bound", seed.lam if seed else None, upper, start)
    first = _rounded_start(form, config, cheapest, upper, start) if seed is None and cheapest and large else None
    # a small model the restricted seed leaves whole: its seed MILP starts from the LP rounded (see ROUND_HINT)
    rounded = None
    if ROUND_HINT and seed is None and cheapest and not large and not _restricts(form, cheapest):
        rounded = _rounded_start(form, config, cheapest, upper, start)
    seed_hint = rounded.hint if rounded else None
    if seed is None and cheapest:
        try:
            seed = _restricted_seed(form, config, mip_gap, lam, least_cost, cheapest,
                                    hint=first.hint if first else None, upper=upper, began=start)
        except SolveTimeoutError:
            seed = None  # out of time in the restricted MILP: the rounded plan (if any) stands
        if seed is None and first is None and not large and _restricts(form, cheapest):
            # the restricted MILP ended without a plan (it left ROUND_SHARE of the time): round the LP
            first = _rounded_start(form, config, cheapest, upper, start, share=1.0)
        if first is not None and (seed is None or seed.lam < first.lam):
            seed = first
        if seed is not None and seed.status == "feasible" and not large and seed.res.backend not in (
                START_BACKEND, ROUNDING_BACKEND):  # large: their LP alone may take 30 s (100 sites x 12 classes)
            seed = _resited(form, config, mip_gap, seed, least_cost)
    # a plan from outside the MILPs (a caller's, the LP rounded) is where HiGHS's sub-MIPs still find better ones
    searched = seed is None or seed.res.backend not in (START_BACKEND, ROUNDING_BACKEND)
    large_enough = form.model.integer_columns() >= CUTOFF_INTEGERS
    try:
        state = _iterate(form, config, mip_gap, lam, from_above, least_cost, upper, start=seed, restarts=restarts,
                         began=start, sub_mips=not searched, seed_hint=seed_hint, prove=large_enough, covers=True)
    except SolveTimeoutError:
        # the seed MILP ended without a plan (it left ROUND_SHARE of the time): the LP rounded, if it gives one
        first = rounded or (_rounded_start(form, config, cheapest, upper, start, share=1.0)
                            if seed is None and cheapest else None)
        if first is None:
            raise
        state = _iterate(form, config, mip_gap, first.lam, False, least_cost, upper, start=first,
                         restarts=restarts, began=start, sub_mips=True, prove=large_enough, covers=True)
    out = _most_goodput_at_ratio(form, config, mip_gap, state, start)
    # "optimal" only when the certified gap is within the target (the issue saw "optimal" at 6.9 %)
    out.status = "optimal" if out.mip_gap <= TARGET_GAP + 1e-12 else "feasible"
    return out


def _iterate(form: Formulation, config: SolveConfig, mip_gap: float, lam: float, from_above: bool,
             least_cost: float, upper: float | None = None, start: _Dinkelbach | None = None,
             rounds: int = MAX_ITERATIONS, restarts: bool = True, began: float | None = None,
             sub_mips: bool = False, seed_hint: list[float] | None = None, prove: bool = False,
             covers: bool = False) -> _Dinkelbach:
    """Dinkelbach's iterations: maximise goodput − λ·cost, λ ← goodput/cost, until F(λ) ≈ 0.

    The reported gap bounds the ratio's relative error. Every MILP at any λ proves
    goodput(x) − λ·cost(x) ≤ bound(F) for every plan x, so every ratio is at most the
    ceiling λ + max(0, bound(F))/least_cost, with least_cost the LP relaxation's least cost
    — a lower bound on any feasible plan's cost, and far tighter than one P plus one decode
    instance — and λ/(1 − bound(F)/floor), with floor the least goodput any plan has (the SLA's share of the
    least load: :func:`placer.ilp.starts._ceiling`, the lower of the two; 16 sites × 12 classes: 108 req/s against
    λ·least_cost = 102.5); ``upper`` (the LP relaxation's ratio bound) is a ceiling too. The gap is
    (lowest ceiling − λ)/λ: at convergence bound(F)/(λ·least_cost) or less. When the budget ends
    before F(λ) ≈ 0, the last plan stands with status "feasible" and that gap; when it
    ends before any plan, SolveTimeoutError.

    Each MILP after the seed stops once F(λ) is proven within PROOF_SHARE of what TARGET_GAP allows
    (max(λ·least_cost, floor/(1 + TARGET_GAP))·TARGET_GAP: a bound that small on F(λ) puts the ceiling within
    TARGET_GAP of λ;
    REL_GAP of the goodput at stake where no cost bound is known); proving F(λ) finer costs HiGHS most
    of a proving round and changes no decision. Not the larger of the two: where a plan costs over
    twice the LP's least cost (whole instances on a small load), REL_GAP of its goodput let a round
    stop at a certified gap above TARGET_GAP (the brute-force micro case: 1.12 %, "feasible").

    ``start``: a plan to start from (:func:`_restricted_seed`), in place of the seed MILP at λ;
    ``rounds``: the most MILPs to run; ``restarts``: HiGHS's (:mod:`placer.ilp.highs`); ``began``: the
    solve's start, for the progress reports (none without it); ``seed_hint``: a plan (values) the seed MILP
    starts from where ``start`` is None (the LP rounded, :data:`ROUND_HINT`); ``sub_mips``: HiGHS's sub-MIP heuristics
    (:mod:`placer.ilp.highs`) in the rounds from a plan, off by default: those rounds mostly prove the plan,
    which the heuristics slow (pdd-two-dc's proving round ~2× faster without, the same plan) — the
    restricted rounds (:func:`_restricted_seed`), which must search, keep them, and so does the seed round, with no MILP's
    plan before it, of a large model (ROUND_FIRST_INTEGERS: there they find its first plan); a smaller model's seed goes
    without (:data:`SMALL_SEED_SUB_MIPS`).

    ``prove`` (the rounds on the whole model): a round from a plan hands HiGHS the last plan's F(λ) plus its
    absolute gap as a cutoff, with restarts (:func:`placer.ilp.highs.solve_mip`): a plan no better than that
    changes no decision, so every pool that cannot beat it is fixed at 0 by its reduced cost and the restarts drop
    it with its flows — the proof is the same (F(λ) ≤ that, the ceiling from it); sixteen-dc's proving MILP
    19 s -> 6.5 s on 2 loaded cores. The restricted rounds, which must search, go without.

    ``covers``: the decode covers (C18, :func:`placer.ilp.covers.take_covers`) go into the model for every round from
    a plan, where they cut the proof's root bound; a seed round before them goes without (they slow its search for a
    first plan: rnd-7-19-trace 6.3 -> 14.3 s, :data:`SMALL_SEED_SUB_MIPS`). With ``prove`` too, the rounds from a plan
    take the local decoder rows (C19) their LP relaxation breaks (:func:`placer.ilp.local_decoders.take_local_decoders`):
    16 sites × 12 classes' proving MILP 41 -> 23-28 s."""
    model = form.model
    searches = SMALL_SEED_SUB_MIPS or model.integer_columns() >= ROUND_FIRST_INTEGERS
    hint, status, last, res = seed_hint, "optimal", None, None
    floor = _goodput_floor(form)
    done = 0
    if start is not None:
        lam, hint, last, res, from_above, done = start.lam, start.hint, start.res, start.res, False, start.iterations
    ceiling = upper if upper else math.inf
    model.maximize = True
    iterations = done
    for iterations in range(done + 1, done + rounds + 1):
        if last is not None and config.spent():
            status = "feasible"
            break
        if covers and last is not None:
            take_covers(form)  # (C18) for the rounds from a plan (placer.ilp.covers); idempotent
        model.objective = _f_objective(form, lam)
        if prove and covers and last is not None and form.local:  # (C19) its LP breaks (placer.ilp.local_decoders)
            take_local_decoders(form, _lp_limit_s(config), config.left_s)
            if config.spent():  # its LPs took what was left (HiGHS may end one late): the last plan stands
                status = "feasible"
                break
        abs_gap = max(ABS_GAP, REL_GAP * _goodput(form, hint)) if hint else ABS_GAP
        if (least_cost > 0 or floor > 0) and lam > 0:  # the bound on F(λ) that puts _ceiling within TARGET_GAP
            abs_gap = max(ABS_GAP, PROOF_SHARE * TARGET_GAP * max(lam * least_cost, floor / (1 + TARGET_GAP)))
        gap_rel = mip_gap
        if from_above:  # this MILP only has to find a good plan to seed λ: a loose gap will do
            abs_gap, gap_rel = max(abs_gap, SEED_GAP * form.problem.arrival_rps), SEED_GAP
        # a seed MILP with no plan before it leaves ROUND_SHARE of the time for the LP's rounding
        limit = _left_s(config) * (1 - ROUND_SHARE) if last is None else _left_s(config)
        cutoff = None
        if prove and last is not None and not from_above and hint is not None:
            cutoff = _goodput(form, hint) - lam * _cost(form, hint) + abs_gap
        res = solve(model, config.backend, limit, hint=hint, mip_gap=gap_rel, abs_gap=abs_gap,
                    restarts=restarts or cutoff is not None, sub_mips=sub_mips or (last is None and searches), cutoff=cutoff)
        if last is not None and res.status is Status.NO_SOLUTION:
            status, res = "feasible", last  # out of time before this MILP found a plan: keep the last one
            break
        _check(res, form, config)
        if res.bound == res.bound:  # nan-safe: a proven bound on F(λ)
            ceiling = min(ceiling, _ceiling(lam, res.bound, least_cost, floor))
        last = res
        if res.status is Status.FEASIBLE and not from_above:  # a seed stopped early is fine: exact steps follow
            status = "feasible"
        good, cost = _goodput(form, res.values), _cost(form, res.values)
        if good <= EPS or cost <= 0:
            if lam == 0.0 or from_above:
                raise InfeasiblePlanError(diagnose(form, _lp_limit_s(config)))
            break
        if from_above:  # the first plan: its ratio is the first λ from below
            lam, hint, from_above = good / cost, res.values, False
            if began is not None:
                _report(config, "first plan", lam, ceiling, began)
            continue
        f_value = good - lam * cost
        if good / cost > lam:  # a better plan: keep it even when this round ends the search
            lam, hint = good / cost, res.values
        if began is not None:
            _report(config, "milp", lam, ceiling, began)
        if f_value <= abs_gap or f_value <= EPS * lam * cost:
            break  # F(λ) ≤ bound: λ is optimal within the gap
        if (ceiling - lam) / lam <= TARGET_GAP:
            break  # the plan's ratio is proven within TARGET_GAP of the optimum
    gap = max(0.0, (ceiling - lam) / lam) if lam > 0 else math.inf
    return _Dinkelbach(lam, hint, res, status, gap, iterations)


def _restricts(form: Formulation, cheapest: list[float]) -> bool:
    """Whether :func:`_restricted_seed` runs on these LP values (it leaves out enough pools)."""
    sites = {(key[1], key[2]) for key, var in form.n.items() if cheapest[var] > 1e-6}
    return sum((key[1], key[2]) not in sites for key in form.n) >= RESTRICT_MIN_SHARE * len(form.n)


def _restricted_seed(form: Formulation, config: SolveConfig, mip_gap: float, lam: float, least_cost: float,
                     cheapest: list[float], hint: list[float] | None = None, upper: float | None = None,
                     began: float | None = None) -> _Dinkelbach | None:
    """Dinkelbach on the pools of the sites (datacenter, chip) the LP relaxation's least-cost plan
    uses — every role and shape of those chips there, no other pool — from λ0; None when that
    leaves out too little to be cheaper (RESTRICT_MIN_SHARE) or has no plan.

    Any plan of the restricted model is a plan of the whole one, so its best ratio is a valid λ
    from below and its plan a feasible start for the MILPs on the whole model, which still prove
    the ratio. Why these pools: with the load fixed, the best ratio is near the cheapest way to
    carry it, and the LP's cheapest pools mark the sites; other shapes of the same chips are kept
    because the LP rounds differently from the MILP (on eight-dc the optimum takes the tp32 MD of a
    chip whose tp16 MD the LP used). On sixteen-dc the seed MILP on the whole model took ~40 s;
    restricted, the seed and its round take 3-5 s and end 0.05-0.2 % below the final plan's ratio
    (eight-dc: 0.4 %), so the rounds on the whole model mostly prove it. Its MILP gets 1 − ROUND_SHARE
    of what is left, so that where it ends without a plan the LP's rounding still has time to give one.
    Where it proves those sites hold no plan whole, it runs on the LP's chips in every datacenter (the LP
    ties across one chip's datacenters: sixteen-dc names eu-west's MI300X, not us-west-2's, since C6's
    step row; infeasible in 0.7 s, then the seed on the whole model took 21-38 s, widened ~5 s)."""
    sites = {(key[1], key[2]) for key, var in form.n.items() if cheapest[var] > 1e-6}
    seed, none = _seed_on(form, config, mip_gap, lam, least_cost, sites, hint, upper, began)
    wider = {(key[1], key[2]) for key in form.n if key[2] in {chip for _, chip in sites}}
    return _seed_on(form, config, mip_gap, lam, least_cost, wider, hint, upper, began)[0] \
        if none and wider != sites else seed


def _seed_on(form: Formulation, config: SolveConfig, mip_gap: float, lam: float, least_cost: float, sites: set,
             hint: list[float] | None, upper: float | None, began: float | None) -> tuple[_Dinkelbach | None, bool]:
    """:func:`_restricted_seed` on these ``sites``, and whether its MILP proved they hold no plan."""
    if sum((key[1], key[2]) not in sites for key in form.n) < RESTRICT_MIN_SHARE * len(form.n):
        return None, False
    model = form.model
    with _on_sites(form, sites) as outside:
        model.maximize, model.objective = True, _f_objective(form, lam)
        hint = None if hint is None or any(hint[var] > 0 for var in outside) else hint  # none from outside them
        first = solve(model, config.backend, _left_s(config) * (1 - ROUND_SHARE), hint=hint, mip_gap=SEED_GAP,
                      abs_gap=max(ABS_GAP, SEED_GAP * form.problem.arrival_rps), restarts=False)
        good, cost = (_goodput(form, first.values), _cost(form, first.values)) if first.status.has_solution else (0, 0)
        if good <= EPS or cost <= 0:  # no plan on these pools (or none in time): the seed runs on the whole model
            return None, first.status is Status.INFEASIBLE
        seed = _Dinkelbach(good / cost, first.values, first, "optimal", math.inf, 1)
        if began is not None:
            _report(config, "first plan", seed.lam, upper, began)
        return _restricted_round(form, config, mip_gap, seed, least_cost), False


def _restricted_round(form: Formulation, config: SolveConfig, mip_gap: float, seed: _Dinkelbach,
                      least_cost: float, share: float = RESTRICTED_SHARE) -> _Dinkelbach:
    """A round from ``seed`` on the model as restricted, within ``share`` of what is left: its bound proves nothing
    on the whole model."""
    within = config.but(time_limit_s=share * config.left_s())
    return _iterate(form, within, mip_gap, seed.lam, False, least_cost, start=seed, rounds=RESTRICTED_ROUNDS,
                    restarts=False, sub_mips=True)


def _resited(form: Formulation, config: SolveConfig, mip_gap: float, seed: _Dinkelbach,
             least_cost: float) -> _Dinkelbach:
    """A restricted round that ended on its time share unproven (:func:`_restricted_seed`) once more, on the sites
    the LP relaxation at the seed's λ opens (:func:`placer.ilp.starts._lp_sites`) and those of the seed's plan (its
    start), within RESITED_SHARE of what is left: the least-cost LP's sites weigh no goodput. On 16 sites ×
    12 classes at λ = 265.2 req/USD: those 9 sites hold a plan at 285.0, the least-cost 8 at most 273.8 (each
    restricted MILP proven at 60 s). The seed stands where the round finds nothing better; a plan, not a proof."""
    sites = _lp_sites(form, config, seed.lam) if not config.spent() else None
    if not sites:
        return seed
    sites |= {(key[1], key[2]) for key, var in form.n.items() if seed.hint[var] > 0.5}
    with _on_sites(form, sites):
        again = _restricted_round(form, config, mip_gap, seed, least_cost, share=RESITED_SHARE)
    return again if again.lam > seed.lam else seed


def _most_goodput_at_ratio(form: Formulation, config: SolveConfig, mip_gap: float, state: _Dinkelbach,
                           start: float) -> Outcome:
    """Among plans with the optimal ratio, the one with the most goodput (no arbitrarily small
    plans); with the budget spent, the last Dinkelbach plan as it is."""
    model, res, best_ratio, status = form.model, state.res, state.lam, state.status
    g_var = model.vars[form.g]
    if g_var.lb >= g_var.ub or config.spent():  # the load is fixed (nothing left to choose), or no time
        return Outcome(res.values, status, state.gap, time.perf_counter() - start, res.backend, state.iterations,
                       best_ratio)
    coeffs = {**form.goodput}
    for i, c in form.cost.items():
        coeffs[i] = coeffs.get(i, 0.0) - best_ratio * (1 - 1e-7) * c
    model.add("ratio_floor", "ratio_floor", coeffs, ">=", 0.0)
    model.objective = {**dict(form.goodput), **{i: -1e-6 * c for i, c in form.cost.items()}}
    try:
        final = solve(model, config.backend, _left_s(config), hint=state.hint, mip_gap=mip_gap)
    finally:
        model.rows.pop()  # leave the formulation as built
    values = final.values if final.status.has_solution else res.values
    if final.status is Status.FEASIBLE:
        status = "feasible"
    return Outcome(values, status, state.gap, time.perf_counter() - start,
                   (final if final.status.has_solution else res).backend, state.iterations, best_ratio)


