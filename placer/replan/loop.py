"""The replanning loop in the simulator: a day served by four fleets, window by window.

in:  a scenario (its workload the peak-hour one), the day's :class:`~placer.replan.timeline.Timeline`,
     a starting plan (the job's current plan), the :class:`~placer.replan.adoption.AdoptionRule`,
     the :class:`~placer.replan.fleets.Startup` costs, a :class:`DayConfig`
out: :class:`DayResult`: per fleet the day's SLA attainment, TTFT P90, goodput, USD and BCR, the
     plan changes, chips moved and capacity-dip minutes, and each window's figures

Each replanning instant (every ``replan_every_s``) the *replanned* fleet does what a job run does
(``placer.service.jobs.runner``): fit the requests of the last ``window_s`` with
:func:`placer.workload.fit_classes` (:func:`~placer.replan.timeline.fit_window`), re-solve
(:func:`placer.optimize.optimize`, warm-started from the current plan), re-evaluate the current
plan's pools under the fitted workload (:func:`placer.optimize.evaluate_plan`), decide with
:func:`~placer.replan.adoption.adopt`, and apply an adopted plan with start-up and drain
(:class:`~placer.replan.fleets.FleetState`). The fitted requests are drawn from the window's
classes (the request log the simulated fleet would have written: every request is logged).

Simulation is window by window: each stretch with one set of pools up is one run of
:func:`placer.sim.simulate` at the window's rate, of at most ``requests_per_window`` requests
(the window's own count when fewer), starting empty; its goodput fraction counts for all the
window's requests. Queues do not carry across windows, so an under-sized window looks better
than it would at the end of a long overload: a stretch whose simulated queues grow is flagged
``overloaded`` in its window and counted in its fleet's ``overloaded_windows``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from placer.errors import InfeasiblePlanError, PlacerError
from placer.optimize import SolveConfig, as_problem, evaluate_plan, optimize
from placer.plan import Plan
from placer.replan.adoption import AdoptionRule, adopt
from placer.replan.backlog import carry
from placer.replan.fleets import FleetState, Startup, changed_pools, pools_of, pools_plan, within_inventory
from placer.replan.routing import Routings, pools_key
from placer.replan.summary import FleetTally, day_json
from placer.replan.timeline import Timeline, Window, fit_window, windows
from placer.sim import SimConfig
from placer.sim.records import simulate_recorded
from placer.specs import Scenario

FLEETS = ("static", "peak", "replanned", "oracle")


@dataclass(frozen=True)
class DayConfig:
    """How the day is simulated and re-solved."""

    replan_every_s: float = 3600.0
    window_s: float | None = None  # the fit window; None: replan_every_s
    requests_per_window: int = 2000
    fit_requests: int = 2000
    carry_queues: bool = True  # False: each window from empty queues, nothing carried (the old account)
    fit_served: bool = True  # the job fits the requests its simulated fleet served; False: the windows' classes
    seed: int = 0
    #: route each (window workload, pools) once and hand the simulator the routed plan (:mod:`placer.replan.routing`);
    #: False: every run routes its pools itself (the same figures, slower: the tests compare the two)
    reuse_routings: bool = True
    solve: SolveConfig = field(default_factory=lambda: SolveConfig("bcr", "ortools", 30.0, marginals=False))


@dataclass
class DayResult:
    data: dict[str, Any]


def _solve(scenario: Scenario, config: SolveConfig, warm: Plan | None = None, cache: dict | None = None,
           warm_evaluated: Plan | None = None) -> Plan | None:
    """The plan for ``scenario`` (None when none is feasible); ``cache``: solves of equal scenarios shared
    (the diurnal cosine is symmetric about the peak, so most windows' workloads come twice a day);
    ``warm_evaluated``: ``warm`` already evaluated on ``scenario`` (not evaluated again)."""
    key = scenario.model_dump_json() if cache is not None else None
    if key is not None and key in cache:
        return cache[key]
    try:
        plan = optimize(scenario, config, warm_start=warm, warm_evaluated=warm_evaluated)
    except InfeasiblePlanError:
        plan = None
    if key is not None:
        cache[key] = plan
    return plan


def _day_workload(scenario: Scenario, wins: list[Window]) -> Scenario:
    """The day's mean workload: the mean rate, each class's share averaged over the requests."""
    total = sum(w.requests for w in wins)
    shares = [sum(w.requests * w.scenario.workload.classes[i].share for w in wins) / total
              for i in range(len(scenario.workload.classes))]
    classes = [c.model_copy(update={"share": s}) for c, s in zip(scenario.workload.classes, shares)]
    workload = scenario.workload.model_copy(update={"arrival_rps": total / sum(w.length_s for w in wins),
                                                    "classes": classes})
    return scenario.model_copy(update={"workload": workload})


def _fit_records(wins: list[Window], rng: random.Random, cap: int, log: dict | None = None) -> tuple[list[dict], float]:
    """Requests of the given windows (at most ``cap``, each window's part by its requests) and their rate:
    drawn from the fleet's served log (``log``: window index → (weight, records) per simulated stretch,
    the requests its simulated pools finished), else — a window no stretch of which served — from the
    window's classes by share."""
    total = sum(w.requests for w in wins)
    records = []
    for w in wins:
        n = max(1, round(cap * w.requests / total))
        stretches = [(weight, rows) for weight, rows in (log or {}).get(w.index, []) if rows and weight > 0]
        if stretches:
            for weight, rows in stretches:
                k = max(1, round(n * weight / sum(x for x, _ in stretches)))
                records.extend({key: r[key] for key in ("input_tokens", "output_tokens", "hit_rate")}
                               for r in rng.choices(rows, k=k))
            continue
        cls = w.scenario.workload.classes
        for c in rng.choices(cls, weights=[c.share for c in cls], k=n):
            records.append({"input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
                            "hit_rate": c.hit_rate})
    return records, total / sum(w.length_s for w in wins)


def _fitted_scenario(window: Window, history: list[Window], rng: random.Random, config: DayConfig,
                     log: dict | None = None) -> Scenario:
    records, rate = _fit_records(history, rng, config.fit_requests, log)
    _, classes = fit_window(records, 1.0, window.scenario.options)
    workload = window.scenario.workload.model_copy(update={"arrival_rps": rate, "classes": classes})
    return window.scenario.model_copy(update={"workload": workload})


class _Replanner:
    """The job in the loop: fit, re-solve, re-evaluate the current plan, decide."""

    def __init__(self, rule: AdoptionRule, current: Plan, config: DayConfig):
        self.rule, self.current, self.config = rule, current, config
        self.last_adopted_s: float | None = None
        self.decisions: list[dict] = []

    def fit_inventory(self, problem) -> None:
        """The current plan cut to the inventory, as the fleet's pools were (the job sees what runs)."""
        cut = within_inventory(problem, pools_of(self.current))
        if changed_pools(pools_of(self.current), cut):
            self.current = pools_plan(self.current, cut)

    def step(self, now_s: float, scenario: Scenario) -> Plan | None:
        """The plan to apply at ``now_s``, or None (the rule keeps the current one)."""
        solve = self.config.solve
        # the current plan on the fitted workload: the rule's baseline and the solve's warm start (evaluated once)
        stripped = self.current.model_copy(update={"routes": [], "assignments": []})
        try:
            current = evaluate_plan(scenario, stripped, solve, other_scenario=True)
        except PlacerError:  # it cannot carry the workload (or, cut by an inventory change, serve at all)
            current = None
        warm = self.current if current is not None else None  # a plan that cannot serve here: solve cold
        candidate = _solve(scenario, solve, warm=warm, warm_evaluated=current)
        if candidate is None:
            self.decisions.append({"at_s": now_s, "verdict": "SKIPPED", "reason": "no feasible plan"})
            return None
        changes = changed_pools(pools_of(self.current), pools_of(candidate))
        baseline = current if changes else candidate  # the same pools: the current plan re-evaluated is the candidate
        since = None if self.last_adopted_s is None else now_s - self.last_adopted_s
        got = adopt(self.rule, has_current=True, baseline=baseline, candidate=candidate, pool_changes=changes,
                    offered_rps=scenario.workload.arrival_rps, since_adoption_s=since)
        self.decisions.append({"at_s": now_s, "verdict": got.verdict.value, "reason": got.reason,
                               "gain_pct": got.gain_pct, "pool_changes": changes})
        if not got.adopts:
            return None
        self.current, self.last_adopted_s = candidate, now_s
        return candidate


def _run(problem, template: Plan, pools, window: Window, n: int, rate: float, seed: int,
         routings: Routings | None = None) -> tuple[dict, list[dict]] | None:
    """One simulator run of ``pools`` and its request log (:func:`placer.sim.records.simulate_recorded`);
    ``routings``: the day's memo of the pools' routing on the window's workload (None: the run routes them)."""
    plan = pools_plan(template, pools)
    if routings is not None:
        plan = routings.replayable(problem, window.scenario.model_dump_json(), template, pools)
        if plan is None:  # routing raised what simulate would raise: no pools able to serve
            return None
    try:
        return simulate_recorded(problem, plan, SimConfig(requests=n, seed=seed, load_rps=rate))
    except PlacerError:  # no pools able to serve (a break-before-make dip to nothing)
        return None


def capacity_of(problem, template: Plan, window: Window, pools, config: DayConfig, cache: dict,
                routings: Routings | None = None) -> float:
    """Requests/s the pools complete when saturated: a run at 4× the window's rate, its requests over the
    span in which they complete — the simulated span less one request's decode (mean output tokens × the
    run's TPOT P50: the first completions come that late, the fleet busy from then to the end). 0 where
    nothing serves. Run only where a stretch's queue grows or a backlog arrives."""
    key = ("capacity", window.scenario.workload.model_dump_json(), pools_key(pools))
    if key not in cache:
        got = _run(problem, template, pools, window, config.requests_per_window, 4 * window.rate_rps, config.seed,
                   routings)
        res = got[0] if got else None
        if not res or not res.get("simulated_s"):
            cache[key] = 0.0
        else:
            classes = window.scenario.workload.classes
            decode_s = sum(c.share * c.output_tokens for c in classes) / sum(c.share for c in classes) \
                * (res.get("tpot_p50_s") or 0.0)
            cache[key] = res["requests"] / max(res["simulated_s"] - decode_s, res["simulated_s"] / 2)
    return cache[key]


def _simulate(window: Window, problem, template: Plan, segments, config: DayConfig, tally: FleetTally,
              cache: dict, fleet: FleetState, routings: Routings | None = None) -> None:
    """Each stretch from empty queues, the backlog the fleet carries accounted (:mod:`placer.replan.backlog`)."""
    for seg in segments:
        offered = window.rate_rps * seg.length_s
        n = max(50, min(config.requests_per_window, round(offered)))
        # equal pools at an equal workload simulate once (same seed): the diurnal day repeats its rates
        key = (window.scenario.workload.model_dump_json(), pools_key(seg.serving), n)
        if key not in cache:
            got = _run(problem, template, seg.serving, window, n, window.rate_rps, config.seed, routings)
            if got is None:
                cache[key] = (0.0, float("inf"), float("inf"), float("inf"), True, [])
            else:
                res, records = got
                grows = any("grows" in line for line in res.get("warnings", []))  # a queue the run cannot drain
                cache[key] = (res["goodput_rps"] / res["offered_rps"], res["ttft_p50_s"], res["ttft_p90_s"],
                              res["ttft_p99_s"], grows, records)
        frac, p50, p90, p99, grows, records = cache[key]
        fleet.served_log.setdefault(window.index, []).append((offered, records))
        cap = None  # a steady queue with nothing carried in: the from-empty run is the stretch's truth
        if config.carry_queues and (grows or fleet.backlog > 0):
            cap = capacity_of(problem, template, window, seg.serving, config, cache, routings)
        got = carry(fleet.backlog, window.rate_rps, cap, seg.length_s, problem.ttft_p90_s)
        fleet.backlog = got.backlog_out
        tally.add_segment(window.index, offered * (1 - got.late_share), frac, p50, p90, p99, grows)
        if got.late_share > 0:  # late behind the queue: not good, their TTFT at least the wait ahead
            tally.add_segment(window.index, offered * got.late_share, 0.0, got.wait_s, got.wait_s, got.wait_s, grows)
    tally.windows[-1]["backlog"] = fleet.backlog


class _Stopwatch:
    """Seconds per phase, wall and this process's CPU (what a shared host's other jobs do not inflate)."""

    def __init__(self) -> None:
        self.began = (time.perf_counter(), time.process_time())
        self.spent = {"solve": [0.0, 0.0], "simulate": [0.0, 0.0]}
        self.at = self.began

    def start(self) -> None:
        self.at = (time.perf_counter(), time.process_time())

    def stop(self, phase: str) -> None:
        self.spent[phase][0] += time.perf_counter() - self.at[0]
        self.spent[phase][1] += time.process_time() - self.at[1]

    def json(self) -> dict:
        total = (time.perf_counter() - self.began[0], time.process_time() - self.began[1])
        return {**{k: round(v[0], 2) for k, v in self.spent.items()}, "total": round(total[0], 2),
                "cpu": {**{k: round(v[1], 2) for k, v in self.spent.items()}, "total": round(total[1], 2)}}


def run_day(scenario: Scenario, timeline: Timeline, start: Plan, rule: AdoptionRule, startup: Startup,
            config: DayConfig = DayConfig()) -> DayResult:
    """The four fleets over the day (see the module docstring)."""
    clock = _Stopwatch()
    timeline = Timeline(**{**timeline.__dict__, "window_s": config.replan_every_s})
    wins = windows(scenario, timeline)
    clock.start()
    solved: dict = {}
    static = _solve(_day_workload(scenario, wins), config.solve)
    busiest = max(wins, key=lambda w: w.rate_rps)
    peak = _solve(busiest.scenario, config.solve, cache=solved)
    clock.stop("solve")
    if static is None or peak is None:
        raise InfeasiblePlanError(f"no plan carries the {'day mean' if static is None else 'peak'} workload "
                                  f"(peak {busiest.rate_rps:.3g} req/s in window {busiest.index})")
    fleets = {name: FleetState(name, startup) for name in FLEETS}
    tallies = {name: FleetTally(name) for name in FLEETS}
    problem0 = as_problem(wins[0].scenario)
    fleets["static"].apply(static, 0.0, problem0)
    fleets["peak"].apply(peak, 0.0, problem0)
    fleets["replanned"].apply(start, 0.0, problem0)
    replanner = _Replanner(rule, start, config)
    rng = random.Random(config.seed)
    fit_s = config.window_s or config.replan_every_s
    cache, last_oracle = {}, None
    routings = Routings() if config.reuse_routings else None
    for w in wins:
        problem = as_problem(w.scenario)
        for name in FLEETS:  # an inventory change takes away what no longer fits, from every fleet
            fleets[name].fit_inventory(problem)
        replanner.fit_inventory(problem)
        clock.start()
        oracle = _solve(w.scenario, config.solve, warm=last_oracle, cache=solved)
        last_oracle = oracle or last_oracle
        if oracle is not None:
            fleets["oracle"].apply(oracle, w.start_s, problem, instant=True)
        history = [h for h in wins if h.start_s < w.start_s and h.start_s + h.length_s > w.start_s - fit_s]
        if history:
            log = fleets["replanned"].served_log if config.fit_served else None
            chosen = replanner.step(w.start_s, _fitted_scenario(w, history, rng, config, log))
            if chosen is not None:
                fleets["replanned"].apply(chosen, w.start_s, problem)
        clock.stop("solve")
        clock.start()
        for name in FLEETS:
            segments, usd = fleets[name].window(w.start_s, w.length_s, problem)
            tallies[name].add_window(w, usd, fleets[name])
            _simulate(w, problem, start, segments, config, tallies[name], cache, fleets[name], routings)
        clock.stop("simulate")
    data = day_json(scenario, wins, fleets, tallies, replanner.decisions, config, startup, rule)
    data["inventory_changes"] = [{"datacenter": dc, "chip": chip, "chips": n, "hour": h}
                                 for dc, chip, n, h in timeline.inventory_changes]
    data["startup"]["instance_s"] = {f"{r.role} {r.datacenter} {r.tp} {r.chip}":
                                      round(startup.instance_s(problem0, r), 3)
                                      for r in sorted(pools_of(start).values(), key=lambda r: r.key)}
    data["timing_s"] = clock.json()  # wall seconds per phase; "cpu": this process's CPU seconds
    return DayResult(data)
