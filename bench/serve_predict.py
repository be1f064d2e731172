"""bench_serve's predictions: the simulator (on the executor's runtime) and the planner, per setup.

in:  the trace, each setup's serve results (``serve_run.serve``, with its calibration serve and probes), the
     line, the CPU profile, the runtime figures
out: :func:`predict` — per setup the planner's TTFT/TPOT, the simulator's (calibrated, and on the probes
     alone), the "as served" column (:func:`host_paced`), the forward-by-forward check and the planner's
     ladder (``bench/planner_check.py``); :func:`chained` — with ``--repeats``, each serve predicted from the
     one before.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from bench import planner_check, serve_handoff, served_forwards, serve_tpot
from bench.serve_report import GATED, METRICS, pct
from bench.serve_scenario import _table, local_kv_gbit, probe_paces, scenario_and_plans, served_paces
from bench.serve_trace import TraceRequest, setups, trace_file
from executor.transport.shaping import LinkShape


#: the planner's pool role of each bench instance (the PD setups' D is the planner's MD: P-MD routes)
INSTANCE_ROLE = {spec.name: {"D": "MD"}.get(spec.role, spec.role) for specs, _ in setups().values() for spec in specs}


def predict(trace: list[TraceRequest], results: dict[str, dict], line: LinkShape, profile: Path, runtime: dict,
            seed: int, shape: bool = True) -> dict:
    """Each setup's TTFT P50/P90/P99 and TPOT P50/P90 by the simulator on the executor's runtime
    (and TTFT by the planner), at the arrivals it saw, from the CPU profile, the probes around the
    serving and the calibration serve before it; and, to tell the table's error from the
    simulator's, once more at the pace the served forwards really went (``served_paces``).
    ``shape``: the calibration also reshapes the prefill table (``served_forwards.table_shape``)."""
    from placer.sim.runtime import ExecutorRuntime, interference_rows

    base = ExecutorRuntime.from_dict(runtime)
    table = _table(profile)
    nic = local_kv_gbit(runtime)
    out: dict = {"planner": {}, "planner_no_runtime": {}, "planner_bare": {}, "deployed": {}, "simulator": {},
                 "probes": {}, "as_served": {},
                 "notes": [], "paces": {}, "served_paces": {}, "forwards": {}, "calibration": {}, "host_pace": {},
                 "ladder": {}, "deployed_by_role": {}}
    with tempfile.TemporaryDirectory() as tmp:  # the reshaped profiles
        for name, res in results.items():
            paces = probe_paces(res.get("probe_forwards", {}), table)
            out["paces"][name] = paces
            rt = replace(base, slowdown=res.get("slowdown", base.slowdown),
                         speedup=tuple(res.get("speedup", base.speedup)), **paces,
                         interference=interference_rows(res["interference"]) if "interference" in res
                         else base.interference)
            if rt.line_rows():  # measured beside the served line (probe_host at its rate)
                rt = replace(rt, line_bytes_per_s=line.bytes_per_s)
            scenario, plans = scenario_and_plans(trace, res["arrivals"], line, profile, nic)
            plan = plans[name]
            probe_rt, sim_table, sim_scenario, sim_plan, cal, sim_profile = rt, table, scenario, plan, {}, profile
            if "calibration" in res:
                cal_forwards = res["calibration"]["forwards_served"]
                factors = served_forwards.table_shape(cal_forwards, table, "prefill") if shape else []
                if factors:  # the prefill table's shape as the calibration's lone prefills went
                    sim_profile = Path(tmp) / f"{name}-profile.json"
                    sim_profile.write_text(json.dumps(served_forwards.reshaped_profile(
                        json.loads(profile.read_text()), "prefill", factors)))
                    sim_table = _table(sim_profile)
                    sim_scenario, sim_plans = scenario_and_plans(trace, res["arrivals"], line, sim_profile, nic)
                    sim_plan = sim_plans[name]
                cal = {**served_forwards.calibration(cal_forwards, sim_table), "prefill_shape": factors}
            # the planner's chip as this deployment's instances got it in the calibration serve (measured before the
            # serve, on another trace): the same table the simulator takes, × each kind's served wall ÷ table
            plan_scenario, plan_plan, deployed = scenario, plan, {}
            if "calibration" in res:
                deployed = served_forwards.deployed_paces(cal_forwards, sim_table)
            if deployed:
                path = Path(tmp) / f"{name}-deployed.json"
                source = f"{name}'s calibration serve (wall ÷ table)"
                base_profile = json.loads(sim_profile.read_text())
                path.write_text(json.dumps(served_forwards.scaled_profile(base_profile, deployed, source)))
                # each role's instance as it got the chip (its own forwards), its own chip in the scenario
                roles = {}
                for inst, paces in served_forwards.deployed_paces_by_instance(cal_forwards, sim_table).items():
                    role = INSTANCE_ROLE.get(inst)
                    if role is not None:
                        roles[role] = Path(tmp) / f"{name}-{inst}.json"
                        roles[role].write_text(json.dumps(served_forwards.scaled_profile(
                            base_profile, {**deployed, **paces}, f"{source}, {inst}'s forwards",
                            chip=f"{base_profile['tables'][0]['chip']}-{inst}")))
                        out["deployed_by_role"].setdefault(name, {})[role] = paces
                plan_scenario, dep_plans = scenario_and_plans(trace, res["arrivals"], line, path, nic, roles)
                plan_plan = dep_plans[name]
                out["deployed"][name] = deployed
            if "decode_pace" in cal or "prefill_pace" in cal:
                out["calibration"][name] = cal
                rt = served_forwards.calibrated(rt, cal)
                out["probes"][name] = _simulate(scenario, plan, trace, res["arrivals"], probe_rt, seed)
            # the planner given the runtime the simulator column takes (its per-request costs on the first token's
            # path: placer.executor_costs), and without it (the ladder's "planner" rung: the step is visible)
            for key, (sc, pl, with_rt) in (("planner", (plan_scenario, plan_plan, rt)),
                                           ("planner_no_runtime", (plan_scenario, plan_plan, None)),
                                           ("planner_bare", (scenario, plan, None))):
                try:
                    m = _planned(sc, pl, with_rt)
                    # the planner's one TPOT is a mean over tokens (Little on the batch law): the TPOT mean row
                    # only, not the percentiles over requests (issue 48: like with like)
                    out[key][name] = {"ttft": (m.ttft_p50_s, m.ttft_p90_s, m.ttft_p99_s),
                                      "tpot": (math.nan, math.nan, m.tpot_s), "rld_token_share": m.rld_token_share}
                except Exception as exc:  # the planner's figure is advisory here: report it
                    out["notes"].append(f"{key.replace('_', ' ')}, {name}: {type(exc).__name__}: {exc}")
            out["simulator"][name] = _simulate(sim_scenario, sim_plan, trace, res["arrivals"], rt, seed)
            out["ladder"][name] = planner_check.ladder_for(trace, res["arrivals"], plan_scenario, plan_plan,
                                                           out["planner_no_runtime"].get(name),
                                                           out["simulator"][name], seed,
                                                           bare=out["planner_bare"].get(name) if deployed else None,
                                                           with_runtime=out["planner"].get(name), runtime=rt)
            out["forwards"][name] = served_forwards.compare(res.get("forwards_served", {}), sim_table, rt)
            served = served_paces(res.get("forwards_served", {}), table, rt.slowdown)
            if served:
                out["served_paces"][name] = served
            at_host = host_paced(trace, res, cal_forwards, sim_table, sim_scenario, sim_plan, rt, seed) \
                if name in out["calibration"] else {}
            if at_host:  # the calibrated simulation at the host's speed as it went in each serve
                out["host_pace"][name] = at_host.pop("host_pace")
                out["as_served"][name] = at_host
            elif served:  # no calibration: at the served forwards' pace (their CPU seconds hold what they cost
                # each other: no interference on top)
                out["as_served"][name] = _simulate(scenario, plan, trace, res["arrivals"],
                                                   replace(probe_rt, **served, interference=()), seed)
    return out


def _planned(scenario, plan, runtime):
    """``evaluate_plan``'s metrics of ``plan``, its TTFT with the executor's per-request costs of ``runtime``
    (an ``ExecutorRuntime``; None: the planner's idealised deployment)."""
    from dataclasses import replace as with_field

    from placer.optimize import SolveConfig, as_problem, evaluate_plan

    problem = with_field(as_problem(scenario), runtime=runtime)
    return evaluate_plan(problem, plan, SolveConfig(time_limit_s=20)).metrics


PREFILL_PACE_WINDOW_S, PREFILL_PACE_LEAST = 20.0, 8  # the bench's serves prefill ~1 prompt a second


def _only(reference: dict[str, float], kind: str) -> dict[str, float]:
    return {kind: reference[kind]} if kind in reference else {}


def host_paced(trace: list[TraceRequest], res: dict, cal_forwards: dict, table, scenario, plan, rt, seed: int
               ) -> dict:
    """The calibrated simulation (``rt``) of each serve of a setup at the host's speed as that serve's lone
    decode steps went, 10 s by 10 s, against the calibration's (``served_forwards.pace_timeline``), and its
    prefills at their own (20 s by 20 s: the compute-bound prefill moves apart from the memory-bound step), at
    the serve's own arrivals; each figure the median over the serves, as "measured" is. ``host_pace``: per
    serve, its timelines, the time-weighted mean of each and the decode steps' lowest and highest window.
    Empty where a serve had too few lone decode steps to read it (a run saved without their times)."""
    reference = served_forwards.cpu_paces(cal_forwards, table)
    sims, timelines = [], []
    for serve in [res, *res.get("repeats", [])]:
        arrivals = serve.get("arrivals", res["arrivals"])
        came = [a for a in arrivals if not math.isnan(a)]
        forwards = serve.get("forwards_served", {})
        timeline = served_forwards.pace_timeline(forwards, table, _only(reference, "decode"), start=min(came))
        if not timeline:
            return {}
        # the prefills' own (compute-bound, they move apart from the decode steps): fewer, so longer windows
        prefill = served_forwards.pace_timeline(forwards, table, _only(reference, "prefill"), start=min(came),
                                                window_s=PREFILL_PACE_WINDOW_S, least=PREFILL_PACE_LEAST)
        span = max(came) - min(came)
        timelines.append({"timeline": timeline, "mean": round(served_forwards.mean_pace(timeline, span), 3),
                          "low": min(f for _, f in timeline), "high": max(f for _, f in timeline),
                          "prefill_timeline": prefill,
                          "prefill_mean": round(served_forwards.mean_pace(prefill, span), 3) if prefill else math.nan})
        sims.append(_simulate(scenario, plan, trace, arrivals,
                              replace(rt, host_pace=tuple(timeline), host_pace_prefill=tuple(prefill)), seed))
    out = {kind: tuple(statistics.median(s[kind][i] for s in sims) for i in range(len(sims[0][kind])))
           for kind in ("ttft", "tpot")} | {"host_pace": timelines}
    if sims[0].get("handoff"):  # the first serve's handoffs at its host's speed (RLD's tokens move with its step)
        out["handoff"] = sims[0]["handoff"]
    return out


def chained(trace: list[TraceRequest], results: dict[str, dict], line: LinkShape, profile: Path, runtime: dict,
            seed: int, shape: bool = True) -> dict:
    """With ``--repeats``: each measured serve predicted from the serve just before it (the first from the
    calibration serve, each repeat from the serve before), so a setup gives as many predictions as serves.
    Per setup, one row per serve: {metric: (measured, simulated)} on the gated metrics."""
    out: dict = {}
    for name, res in results.items():
        if "calibration" not in res or not res.get("repeats"):
            continue
        serves = [res["calibration"], res, *res["repeats"]]
        for before, serve in zip(serves, serves[1:]):
            cur = {**res, **{k: serve[k] for k in ("ttft_s", "tpot_s", "forwards_served")},
                   "arrivals": serve.get("arrivals", res["arrivals"]),  # runs saved before repeats kept theirs
                   "calibration": {"forwards_served": before["forwards_served"]}}
            sim = predict(trace, {name: cur}, line, profile, runtime, seed, shape)["simulator"][name]
            out.setdefault(name, []).append({label: (pct(serve[f"{kind}_s"], q), sim[kind][i])
                                             for label, kind, i, q in METRICS if label in GATED})
    return out


def _simulate(scenario, plan, trace: list[TraceRequest], arrivals: list[float], rt, seed: int) -> dict:
    from placer.sim import SimConfig

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        n = trace_file(path, trace, arrivals)
        with serve_handoff.sim_handoffs([]) as plans:
            sim, tpot_mean = serve_tpot.simulate_with_token_mean(
                scenario, plan, SimConfig(requests=n, seed=seed, workload="trace", trace=str(path),
                                          warmup_fraction=0.0, runtime=rt))
    return {"ttft": (sim["ttft_p50_s"], sim["ttft_p90_s"], sim["ttft_p99_s"]),
            "tpot": (sim["tpot_p50_s"], sim["tpot_p90_s"], tpot_mean),
            "handoff": serve_handoff.sim_summary(sim, plans),
            "busy": {p["role"]: p.get("busy_fraction", p.get("utilization")) for p in sim["pools"]}}
