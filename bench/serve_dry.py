"""bench_serve --dry: the trace simulated as if served — no executor — with the planner beside the simulator.

in:  the trace (``serve_trace.make_trace``), the line, a CPU profile and runtime figures (a saved run's:
     ``bench_serve.py --json X`` writes X.profile.json and X.runtime.json), optionally a saved run's serves
     (X.served.json: each setup's probes and calibration serve, so the planner and the simulator take the chip as
     that deployment got it, as in a real run)
out: :func:`closed_loop_arrivals` (the arrivals a setup would see: each later turn ``think_s`` after the simulated
     answer before it, as ``serve_run.replay`` submits it), :func:`load_by_quarter` (the output tokens' share that
     arrives in each quarter of the run), :func:`dry` (per setup ``serve_predict.predict`` on those arrivals, printed
     by :func:`print_dry`: TTFT P50/P90 and the TPOT mean over tokens of the planner (without and with the
     executor's runtime: its per-request costs on the first token's path), the simulator on Poisson
     arrivals at the trace's mean rate, the simulator on the trace's own arrivals — without and with the
     executor's runtime —, the decoders' busy fractions and the simulated handoffs)

Why (issue 48): the planner and the simulator on Poisson arrivals assume a steady load; a trace that bunches its
long answers (the old one: 81 % of the output tokens in the first 26 % of the run) is another workload, and
the planner's TPOT read −40 % against it while it was within 10 % of the simulator given its own inputs. This
checks a trace's shape in seconds, before the 20 minutes of a serve on a quiet host.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import replace
from pathlib import Path

from bench.serve_trace import TraceRequest, setups, trace_file
from executor.transport.shaping import LinkShape

#: what a dry run takes from a saved run's serves of a setup (its serve's own forwards stay behind)
FROM_SERVED = ("slowdown", "speedup", "interference", "probe_forwards")
FIGURES = (("TTFT P50", "ttft", 0), ("TTFT P90", "ttft", 1), ("TPOT mean", "tpot", 2))
RUNGS = ("planner", "planner + runtime", "sim: classes, poisson", "sim: trace, no runtime", "sim: trace, runtime")


def first_guess(trace: list[TraceRequest], step_s: float = 0.012) -> list[float]:
    """Arrivals before any simulation: openings and anomalous requests at their times, each later turn its
    think time after the turn before it, whose answer took ``step_s`` a token."""
    arrivals = [r.t_s if r.conv < 0 or r.turn == 0 else math.nan for r in trace]
    index = {(r.conv, r.turn): i for i, r in enumerate(trace) if r.conv >= 0}
    for i, r in enumerate(trace):  # a conversation's turns follow each other in the trace
        if r.conv >= 0 and r.turn > 0:
            before = index[(r.conv, r.turn - 1)]
            arrivals[i] = arrivals[before] + trace[before].max_tokens * step_s + r.t_s
    return arrivals


def closed_loop_arrivals(trace: list[TraceRequest], name: str, line: LinkShape, profile: Path, nic_gbit: float,
                         rt, seed: int, rounds: int = 6, tol_s: float = 0.005) -> list[float]:
    """The arrivals ``name`` would see: the simulator (on ``rt``, an ``ExecutorRuntime``) serves the trace at the
    arrivals so far, then each later turn moves to ``think_s`` after its predecessor's simulated end; until no
    arrival moves more than ``tol_s`` or ``rounds`` runs."""
    from placer.sim import SimConfig
    from placer.sim.engine import Simulation, simulate

    from bench.serve_scenario import scenario_and_plans

    arrivals = first_guess(trace)
    nxt = {(r.conv, r.turn): i for i, r in enumerate(trace) if r.conv >= 0}
    for _ in range(rounds):
        finished: dict[int, float] = {}

        class _Timed(Simulation):
            def _finish(self, req, t: float) -> None:
                finished[req.rid] = t
                super()._finish(req, t)

        scenario, plans = scenario_and_plans(trace, arrivals, line, profile, nic_gbit)
        order = sorted(range(len(trace)), key=lambda i: arrivals[i])  # trace_file's order: the simulator's rids
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.jsonl"
            n = trace_file(path, trace, arrivals)
            simulate(scenario, plans[name], SimConfig(requests=n, seed=seed, workload="trace", trace=str(path),
                                                       warmup_fraction=0.0, runtime=rt), simulation_class=_Timed)
        start = arrivals[order[0]]
        done = {order[rid]: start + t for rid, t in finished.items()}
        moved = list(arrivals)
        for i, r in enumerate(trace):
            j = nxt.get((r.conv, r.turn + 1)) if r.conv >= 0 else None
            if j is not None and i in done:
                moved[j] = done[i] + trace[j].t_s
        shift = max(abs(a - b) for a, b in zip(moved, arrivals))
        arrivals = moved
        if shift < tol_s:
            break
    return arrivals


def load_by_quarter(trace: list[TraceRequest], arrivals: list[float]) -> list[float]:
    """The share of the trace's output tokens whose request arrives in each quarter of its span (first to last
    arrival): a steady load puts about a quarter in each."""
    seen = [(a, r.max_tokens) for a, r in zip(arrivals, trace) if not math.isnan(a)]
    lo, hi = min(a for a, _ in seen), max(a for a, _ in seen)
    span = max(hi - lo, 1e-9)
    out = [0.0] * 4
    for a, tokens in seen:
        out[min(3, int(4 * (a - lo) / span))] += tokens
    total = sum(out)
    return [x / total for x in out]


def dry(trace: list[TraceRequest], line: LinkShape, profile: Path, runtime: dict, seed: int,
        served: dict | None = None, shape: bool = True) -> dict:
    """Per setup: the closed-loop arrivals, then ``serve_predict.predict`` on them as if served (a saved run's
    probes and calibration serve where ``served`` has them). Returns {"arrivals": …, "pred": …}."""
    from placer.sim.runtime import ExecutorRuntime, interference_rows

    from bench.serve_predict import predict
    from bench.serve_scenario import local_kv_gbit

    base = ExecutorRuntime.from_dict(runtime)
    results, arrivals = {}, {}
    for name in setups():
        saved = (served or {}).get(name, {})
        res = {k: saved[k] for k in FROM_SERVED if k in saved}
        if "calibration" in saved:
            res["calibration"] = {"forwards_served": saved["calibration"]["forwards_served"]}
        rt = replace(base, slowdown=res.get("slowdown", base.slowdown),
                     speedup=tuple(res.get("speedup", base.speedup)),
                     interference=interference_rows(res["interference"]) if "interference" in res
                     else base.interference)
        arrivals[name] = closed_loop_arrivals(trace, name, line, profile, local_kv_gbit(runtime), rt, seed)
        results[name] = {**res, "arrivals": arrivals[name], "forwards_served": {}}
    return {"arrivals": arrivals, "pred": predict(trace, results, line, profile, runtime, seed, shape)}


def _rungs(pred: dict, name: str) -> dict[str, dict[str, float]]:
    ladder = pred["ladder"].get(name, {})
    rungs = {r: ladder.get(r, {}) for r in RUNGS}
    sim = pred["simulator"][name]
    rungs["sim: trace, runtime"] = {label: sim[kind][i] for label, kind, i in FIGURES}
    return rungs


def print_dry(trace: list[TraceRequest], out: dict) -> dict:
    """The dry run's table; returns per setup and figure the planner's error against the trace simulations."""
    pred = out["pred"]
    kinds = {k: sum(r.kind == k for r in trace) for k in ("new", "turn", "anomalous")}
    print(f"dry run (simulated as if served, no executor): {len(trace)} requests ({kinds['new']} conversations, "
          f"{kinds['turn']} later turns, {kinds['anomalous']} anomalous)")
    errors: dict = {}
    for name, arrivals in out["arrivals"].items():
        seen = [a for a in arrivals if not math.isnan(a)]
        quarters = load_by_quarter(trace, arrivals)
        sim = pred["simulator"][name]
        busy = ", ".join(f"{role} {b:.2f}" for role, b in sim.get("busy", {}).items() if b is not None)
        print(f"\n{name}: span {max(seen) - min(seen):.0f} s; output tokens by quarter of the run "
              f"{' / '.join(f'{100 * q:.0f}' for q in quarters)} %; simulated busy {busy}")
        if sim.get("handoff") and name == "pdd":
            h = sim["handoff"]
            print(f"  simulated handoffs one-shot {h['handoffs'].get('one-shot', 0)}, catch-up "
                  f"{h['handoffs'].get('catch-up', 0)}, line first {h.get('line_first', 0)}; RLD's share of the "
                  f"output tokens {100 * h['rld_token_share']:.1f} %")
        rungs = _rungs(pred, name)
        print(f"  {'metric':<10}" + "".join(f"{r:>24}" for r in RUNGS) + f"{'planner vs trace sims':>26}")  # each: without / with the runtime
        for label, _kind, _i in FIGURES:
            cells = "".join(f"{rungs[r].get(label, math.nan):>24.4f}" for r in RUNGS)
            # like with like: the planner without the runtime against the trace without it, and with it against it
            errs = [rungs[p].get(label, math.nan) / rungs[s].get(label, math.nan) - 1
                    for p, s in (("planner", "sim: trace, no runtime"), ("planner + runtime", "sim: trace, runtime"))]
            errors.setdefault(name, {})[label] = errs
            print(f"  {label:<10}{cells}{' / '.join(f'{100 * e:+.0f}%' for e in errs):>26}")
    for note in pred.get("notes", []):
        print(f"note: {note}")
    return errors


def run_dry(trace: list[TraceRequest], line: LinkShape, profile: Path, runtime_path: Path, seed: int,
            served_path: Path | None, shape: bool = True, json_path: Path | None = None) -> int:
    """``bench_serve.py --dry``'s body: simulate, print, optionally save the figures."""
    runtime = json.loads(runtime_path.read_text())
    served = json.loads(served_path.read_text()) if served_path else None
    out = dry(trace, line, profile, runtime, seed, served, shape)
    errors = print_dry(trace, out)
    if json_path:
        json_path.write_text(json.dumps({"arrivals": out["arrivals"], "planner_errors": errors,
                                         "ladder": out["pred"]["ladder"]}, indent=2, default=str))
    return 0
