"""Where the planner (ILP) and the simulator part on the serving bench: one input changed at a time.

in:  a setup's scenario and plan (``bench_serve.scenario_and_plans``), the trace as served (a placer
     JSONL trace, ``bench_serve.trace_file``), the executor runtime the simulator column uses
     (``placer.sim.runtime.ExecutorRuntime``) and the planner's own figures (``evaluate_plan``)
out: :func:`ladder` — TTFT P50/P90, TPOT P50 (over requests) and TPOT mean (over tokens: the planner's
     statistic, ``bench/serve_tpot.py``) on seven rungs, each one step from the one before, and :func:`ladder_for`'s
     eighth (4b, :func:`pairs_apart`):

0. ``planner, bare profile``: the ILP on the profile as measured alone (a forward with nothing beside it);
   the step to rung 1 is what the deployment's sharing of the chip costs (given only with a calibration serve);
1. ``planner``: the ILP's laws (``placer.optimize.evaluate_plan``): the scenario's classes (mean input,
   output and hit rate each), Poisson arrivals, the planner's deployment (no executor overheads), on the
   profile as the deployment's instances got the chip (``served_forwards.deployed_paces``: the table × each
   kind's wall ÷ table in the calibration serve, measured before the serve; the bare profile without one);
1b. ``planner + runtime``: the same, given the executor's runtime the simulator column takes
   (``Problem.runtime``: its per-request costs on the first token's path, :mod:`placer.executor_costs`) —
   the bench's gated planner column; the step from rung 1 is what the plan's promise gains by them;
2. ``sim: classes, poisson``: the simulator on exactly the planner's inputs (``SimConfig(workload="classes",
   arrivals="poisson", runtime=None)``, many requests): where it differs from rung 1, a planner law is off
   for its own inputs — the ILP is wrong;
2b. ``sim: classes, runtime``: the same with the executor's runtime the simulator column takes: against rung 1b,
   where the planner's price of the executor's costs (:mod:`placer.executor_costs`) parts from the simulator's
   charge on the planner's own inputs (the host's sharing of its cores, which the planner leaves out, included; the
   host's paces not again: the deployed profile holds them, :func:`at_table_pace`);
3. ``sim: trace, no runtime``: the bench's trace (its prompts, outputs, hit rates and arrival times) on the
   planner's deployment: the step from rung 2 is what the classes-and-Poisson summary of the trace costs
   — an input the planner is given, not a law;
4. ``sim: trace, runtime``: the bench's simulator column (the executor's overheads and the host's paces):
   the step from rung 3 is what the executor costs beyond the profile's forwards (rungs 1-3 take the
   deployed profile, so this is its overheads and the timing of who slows whom, not the mean slowdown);
4b. ``sim: trace, pairs apart``: rung 2b's simulator (the deployed profile at its pace) on the trace as served, each arrival within 200 ms of the one
   before (``serve_report.clumped_arrivals``: turns of conversations locked in phase) moved 1 s later: the step
   from rung 4 is what the arrivals' pairs cost, which no class or cv² holds (serve18b's pdd TTFT P50: 0.177 s
   over five seeds, 0.154 with its 12 pairs apart; the planner 0.152).

:func:`print_ladder` prints the rungs beside the measured figure, with each rung's error.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

RUNGS = ("planner, bare profile", "planner", "planner + runtime", "sim: classes, poisson", "sim: classes, runtime",
         "sim: trace, no runtime", "sim: trace, runtime", "sim: trace, pairs apart")
PAIRS_APART_S = 1.0  # how far rung 4b moves the second arrival of a pair
FIGURES = (("TTFT P50", "ttft_p50_s"), ("TTFT P90", "ttft_p90_s"), ("TPOT P50", "tpot_p50_s"),
           ("TPOT mean", "tpot_mean_s"))
POISSON_REQUESTS = 4000


def _figures(sim: dict, tpot_mean: float) -> dict[str, float]:
    return {label: sim[key] for label, key in FIGURES if key in sim} | {"TPOT mean": tpot_mean}


def _planned(planner: dict) -> dict[str, float]:
    """The planner's figures: its TPOT is a mean over tokens (the TPOT mean row; none over requests)."""
    tpot = planner.get("tpot", ())
    return {"TTFT P50": planner["ttft"][0], "TTFT P90": planner["ttft"][1], "TPOT P50": math.nan,
            "TPOT mean": tpot[2] if len(tpot) > 2 else math.nan}


def ladder(scenario, plan, trace_path: Path, n: int, planner: dict | None, simulated: dict | None,
           seed: int, bare: dict | None = None, with_runtime: dict | None = None, runtime=None) -> dict:
    """The rungs' figures for one setup: ``planner`` its {"ttft": (p50, p90, p99), "tpot": …} on
    ``scenario``'s profile, ``bare`` the same on the bare profile (rung 0, optional), ``with_runtime`` the same
    given the executor's runtime (rung 1b, optional), ``simulated`` the bench's simulator column ({"ttft": …,
    "tpot": (p50, p90)}, rung 4), ``runtime`` that column's ``ExecutorRuntime`` (rung 2b, optional)."""
    from bench.serve_tpot import simulate_with_token_mean
    from placer.sim import SimConfig

    rungs: dict[str, dict[str, float]] = {}
    if bare:
        rungs["planner, bare profile"] = _planned(bare)
    if planner:
        rungs["planner"] = _planned(planner)
    if with_runtime:
        rungs["planner + runtime"] = _planned(with_runtime)
    poisson = simulate_with_token_mean(scenario, plan, SimConfig(
        requests=POISSON_REQUESTS, seed=seed, workload="classes", arrivals="poisson", runtime=None))
    rungs["sim: classes, poisson"] = _figures(*poisson)
    if runtime is not None:
        runtime = at_table_pace(runtime)
        rungs["sim: classes, runtime"] = _figures(*simulate_with_token_mean(scenario, plan, SimConfig(
            requests=POISSON_REQUESTS, seed=seed, workload="classes", arrivals="poisson", runtime=runtime)))
    rungs["sim: trace, no runtime"] = _figures(*_trace_sim(scenario, plan, trace_path, n, seed, None))
    if simulated:
        tpot = simulated["tpot"]
        rungs["sim: trace, runtime"] = {"TTFT P50": simulated["ttft"][0], "TTFT P90": simulated["ttft"][1],
                                        "TPOT P50": tpot[0], "TPOT mean": tpot[2] if len(tpot) > 2 else math.nan}
    return rungs


def ladder_for(trace, arrivals, scenario, plan, planner: dict | None, simulated: dict | None, seed: int,
               bare: dict | None = None, with_runtime: dict | None = None, runtime=None) -> dict:
    """:func:`ladder` with the trace written as ``bench_serve.trace_file`` does."""
    from bench.serve_trace import trace_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        n = trace_file(path, trace, arrivals)
        rungs = ladder(scenario, plan, path, n, planner, simulated, seed, bare, with_runtime, runtime)
        apart = pairs_apart(arrivals)
        if runtime is not None and apart != list(arrivals):
            n = trace_file(path, trace, apart)
            rungs["sim: trace, pairs apart"] = _figures(*_trace_sim(scenario, plan, path, n, seed,
                                                                    at_table_pace(runtime)))
        return rungs


def at_table_pace(runtime):
    """``runtime`` for a simulation on the deployed profile (rungs 2b and 4b): the table already runs at each kind's
    wall ÷ table as the calibration serve went (``served_forwards.deployed_paces``, the neighbours' mean cost inside),
    so the host's paces are 1 and its pairs' interference rows go — kept, they charged the host's speed twice (pdd's
    decode: the table × 1.16, then × the calibration's pace and × 1.68 beside the other decoder: TPOT +32 % on
    serve19 where rung 2 read -6 %). Its per-request costs, Tokens messages and cores stay."""
    from dataclasses import replace

    return replace(runtime, prefill_pace=1.0, decode_pace=1.0, interference=())


def pairs_apart(arrivals: list[float], by_s: float = PAIRS_APART_S) -> list[float]:
    """``arrivals`` with each one that came within ``serve_report.CLUMP_S`` of the one before moved ``by_s`` later."""
    from bench.serve_report import CLUMP_S

    order = sorted((i for i, a in enumerate(arrivals) if not math.isnan(a)), key=lambda i: arrivals[i])
    second = {b for a, b in zip(order, order[1:]) if arrivals[b] - arrivals[a] < CLUMP_S}
    return [a + by_s if i in second else a for i, a in enumerate(arrivals)]


def _trace_sim(scenario, plan, path: Path, n: int, seed: int, runtime):
    from bench.serve_tpot import simulate_with_token_mean
    from placer.sim import SimConfig

    return simulate_with_token_mean(scenario, plan, SimConfig(requests=n, seed=seed, workload="trace", trace=str(path),
                                                              warmup_fraction=0.0, runtime=runtime))


def print_ladder(ladders: dict[str, dict], measured: dict[str, dict[str, float]]) -> None:
    """Per setup and figure, each rung and its error against the executor's measured figure."""
    if not ladders:
        return
    print("\nplanner vs simulator, one input at a time (error = rung / measured - 1; rungs: the ILP on the profile "
          "measured alone; the ILP on the profile as the deployment got the chip (the calibration serve's wall ÷ "
          "table); the same given the executor's runtime (its per-request costs on the first token's path: the "
          "gated planner column); the simulator on the ILP's inputs — classes, Poisson, no executor overheads; the "
          "same with the executor's runtime; on the trace as served; with the executor's runtime = the simulated "
          "column; the same simulator as the classes' with the runtime, on the trace with each arrival within 200 ms "
          "of the one before moved 1 s later — what the arrivals' pairs cost):")
    rungs_shown = [r for r in RUNGS if any(r in rungs for rungs in ladders.values())]
    print(f"  {'setup':<12} {'metric':<9} {'measured':>9} " + " ".join(f"{r:>24}" for r in rungs_shown))
    for name, rungs in ladders.items():
        for label, _key in FIGURES:
            meas = measured.get(name, {}).get(label, math.nan)
            cells = []
            for r in rungs_shown:
                v = rungs.get(r, {}).get(label, math.nan)
                err = v / meas - 1 if meas and meas > 0 and not math.isnan(v) else math.nan
                cells.append(f"{v:>15.3f} {100 * err:>+7.0f}%" if not math.isnan(v) else f"{'-':>24}")
            print(f"  {name:<12} {label:<9} {meas:>9.3f} " + " ".join(cells))
