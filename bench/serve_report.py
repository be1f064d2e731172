"""bench_serve's report: measured vs simulated vs planned per setup, the handoffs, where TTFT went.

in:  each setup's serve results (``serve_run.serve``) and the predictions (``serve_predict.predict``)
out: :func:`report` prints the whole report and returns its figures; :func:`compare` — the three columns
     with their errors and the gate; :func:`print_chained`, :func:`print_phases`, :func:`print_forwards`.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics

import numpy as np

from bench import planner_check, serve_handoff, served_forwards, serve_tpot
from bench.serve_trace import MODEL, TraceRequest
from executor.transport.shaping import LinkShape


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def _drift_text(drifts: list[float] | None) -> str:
    """The calibration line's note of the host's drift between the calibration and the measured serve."""
    if not drifts:
        return ""
    kept = min(drifts)
    again = f"; served again {len(drifts) - 1}x after {', '.join(f'{d:.2f}x' for d in drifts[:-1])}" \
        if len(drifts) > 1 else ""
    flag = f" BEYOND {served_forwards.HOST_DRIFT}x: the host, not the simulator" \
        if kept > served_forwards.HOST_DRIFT else ""
    return f" [host's pace vs the serve {kept:.2f}x{again}{flag}]"


def p90_spread(values: list[float], rng: random.Random, draws: int = 400) -> float:
    """Relative half-width of the 90 % bootstrap interval of the P90: how stable the run's P90 is."""
    if len(values) < 10:
        return math.nan
    p90 = pct(values, 90)
    boot = sorted(pct(rng.choices(values, k=len(values)), 90) for _ in range(draws))
    return (boot[int(0.95 * draws) - 1] - boot[int(0.05 * draws)]) / 2 / p90


CLUMP_S = 0.2  # arrivals this close to the one before: a pair the planner's classes and cv² do not hold


def clumped_arrivals(arrivals: list[float], within_s: float = CLUMP_S) -> tuple[int, int, float]:
    """(gaps under ``within_s``, gaps, Poisson's expected count of them at the run's rate): conversations locked
    in phase send their turns in pairs (``serve_trace.think_times``), which two moments of the gaps miss."""
    seen = sorted(a for a in arrivals if not math.isnan(a))
    gaps = [b - a for a, b in zip(seen, seen[1:])]
    if not gaps or seen[-1] <= seen[0]:
        return 0, len(gaps), math.nan
    rate = len(gaps) / (seen[-1] - seen[0])
    return sum(g < within_s for g in gaps), len(gaps), len(gaps) * (1 - math.exp(-rate * within_s))


# ---- report ------------------------------------------------------------------------------------------


#: (label, kind, index in a prediction's tuple, percentile over requests or "mean": over tokens)
METRICS = (("TTFT P50", "ttft", 0, 50), ("TTFT P90", "ttft", 1, 90), ("TTFT P99", "ttft", 2, 99),
           ("TPOT P50", "tpot", 0, 50), ("TPOT P90", "tpot", 1, 90), ("TPOT mean", "tpot", 2, "mean"))
GATED = ("TTFT P50", "TTFT P90", "TPOT P50")  # issue 19: the simulator within 15 % on the full run
#: the planner's gate: its TPOT is a mean over tokens (issue 48), read against the measured mean over tokens
PLANNER_GATED = ("TTFT P50", "TTFT P90", "TPOT mean")
STATISTICS = ("TTFT P50/P90/P99 and TPOT P50/P90: percentiles over requests (a request's TPOT: its mean gap, "
              "(last - first token) / (output - 1)); TPOT mean: over tokens (the requests' gaps summed / their "
              "count: each token weighs one), the planner's statistic (Little on its batch law), so its TPOT cell "
              "is on that row alone")


def compare(results: dict[str, dict], pred: dict) -> dict:
    """Print measured vs simulated (and the planner's TTFT) per setup with the error; return them."""
    rows: dict = {}
    spread_rng = random.Random(0)
    print("\nmeasured vs predicted (s; error = predicted / measured - 1; simulated: from the profile, the probes "
          "around the serving and the calibration serve before it; probes only: without the calibration; "
          "as served: the same simulation at the host's speed as each serve's own forwards went, or without a "
          "calibration the probes' at their pace):")
    print(f"  ({STATISTICS}; the simulator is gated on {', '.join(GATED)}, the planner on {', '.join(PLANNER_GATED)})")
    print(f"  {'setup':<12} {'metric':<9} {'measured':>9} {'simulated':>10} {'error':>7}   {'probes':>8} {'error':>7}"
          f"   {'planner':>8} {'error':>7}   {'as served':>9} {'error':>7}")

    def cell(got: float, meas: float, width: int) -> tuple[float, str]:
        err = got / meas - 1 if meas > 0 else math.nan
        return err, (f"{got:>{width}.3f} {100 * err:>+6.0f}%" if not math.isnan(got) else f"{'-':>{width}} {'':>7}")

    spreads: list[float] = []
    for name, res in results.items():
        sim = pred.get("simulator", {}).get(name)
        probes = pred.get("probes", {}).get(name)
        plan = pred.get("planner", {}).get(name)
        served = pred.get("as_served", {}).get(name)
        rows[name] = {}
        own: list[str] = []
        for label, kind, i, q in METRICS:
            serves = serve_figures(res, kind, q)
            meas = statistics.median(serves)
            got = _at(sim, kind, i)
            err = got / meas - 1 if meas > 0 else math.nan
            b_got = _at(probes, kind, i)
            b_err, b_txt = cell(b_got, meas, 8)
            p_got = _at(plan, kind, i)
            p_err, p_txt = cell(p_got, meas, 8)
            s_got = _at(served, kind, i)
            s_err, s_txt = cell(s_got, meas, 9)
            rows[name][label] = {"measured": meas, "simulated": got, "error": err, "probes": b_got,
                                 "probes_error": b_err, "planner": p_got, "planner_error": p_err,
                                 "as_served": s_got, "as_served_error": s_err, "serves": serves}
            if len(serves) > 1 and label in GATED:
                spread = (max(serves) - min(serves)) / meas if meas > 0 else math.nan
                spreads.append(spread)
                inside = min(serves) <= got <= max(serves)
                own.append(f"{label} {min(serves):.3f}-{max(serves):.3f} (±{50 * spread:.0f} %, simulated "
                           f"{'inside' if inside else 'outside'})")
            flag = " *" if label in GATED and not abs(err) <= 0.15 else ""
            p_flag = " *" if label in PLANNER_GATED and not abs(p_err) <= 0.15 and not math.isnan(p_got) else ""
            print(f"  {name:<12} {label:<9} {meas:>9.3f} {got:>10.3f} {100 * err:>+6.0f}%{flag:<2} {b_txt}   "
                  f"{p_txt}{p_flag:<2} {s_txt}")
        if sim and sim.get("busy"):
            busy = sim["busy"]
            most = max(busy.values())
            print(f"  {name:<12} (simulated busy fraction {', '.join(f'{r} {b:.2f}' for r, b in busy.items())}: near "
                  f"{most:.2f} a cost error e moves the queueing by about e / (1 - {most:.2f}) = "
                  f"{1 / max(1 - most, 0.01):.1f} e)")
        moves = pred.get("host_pace", {}).get(name)
        if moves:
            print(f"  {name:<12} (the host's speed in each serve ÷ the calibration's, its lone forwards' thread CPU "
                  "÷ the table's, mean of its decode steps' 10-s windows (lowest-highest) / of its prefills': "
                  + ", ".join(f"{m['mean']:.2f} ({m['low']:.2f}-{m['high']:.2f}) / "
                              f"{m.get('prefill_mean', math.nan):.2f}" for m in moves)
                  + "; the as-served column charges them)")
        if own:
            print(f"  {name:<12} (the executor itself, {len(serves)} serves of this trace, measured = their median: "
                  + "; ".join(own) + ")")
        spread = p90_spread(res["ttft_s"], spread_rng)
        rows[name]["ttft_p90_spread"] = spread
        print(f"  {name:<12} (TTFT P90 of {len(res['ttft_s'])} requests: bootstrap 90 % interval "
              f"±{100 * spread:.0f} %)")
        close, gaps, poisson = clumped_arrivals(res.get("arrivals", []))
        if gaps:
            rows[name]["clumped_arrivals"] = [close, gaps, round(poisson, 1)]
            paired = ": turns that came in pairs, a clump the planner's classes and cv² do not hold (the ladder's " \
                "'pairs apart')" if close > 1.5 * poisson else ""
            print(f"  {name:<12} (arrivals within {1000 * CLUMP_S:.0f} ms of the one before: {close} of {gaps}, "
                  f"Poisson at the run's rate {poisson:.1f}{paired})")
    order = lambda source: sorted(rows, key=lambda n: rows[n]["TTFT P90"][source])
    same, tied = same_ordering(rows)
    worst = max((abs(r[m]["error"]) for r in rows.values() for m in GATED), default=math.nan)
    ties = "; tied, their serves' P90s overlapping: " + ", ".join(f"{a} and {b}" for a, b in tied) if tied else ""
    print(f"  ordering of the setups by TTFT P90: measured {order('measured')}, simulated "
          f"{order('simulated')} ({'same' if same else 'DIFFERENT'} on the pairs the executor's serves order{ties}); "
          f"worst error on {', '.join(GATED)}: {100 * worst:.0f} % (* = outside 15 %)")
    planned = [abs(r[m]["planner_error"]) for r in rows.values() for m in PLANNER_GATED
               if not math.isnan(r[m]["planner_error"])]
    if planned:
        deployed = pred.get("deployed", {})
        on = (" on the profile as each setup's instances got the chip in its calibration serve (wall ÷ table: "
              + ", ".join(f"{n} " + "/".join(f"{d.get(k, math.nan):.2f}" for k in ("prefill", "decode"))
                          for n, d in deployed.items()) + " prefill/decode"
              + "".join(f"; {n}'s decode by instance: " + ", ".join(f"{role} {p['decode']:.2f}" for role, p in roles.items()
                                                                    if "decode" in p)
                        for n, roles in pred.get("deployed_by_role", {}).items()
                        if sum("decode" in p for p in roles.values()) > 1) + ")") if deployed else ""
        given = " given the executor's runtime (its per-request costs on the first token's path)" \
            if pred.get("planner_no_runtime") else ""
        print(f"  planner (ILP, placer.optimize.evaluate_plan{on}{given}): {sum(e <= 0.15 for e in planned)} of "
              f"{len(planned)} within 15 % on {', '.join(PLANNER_GATED)}, worst error {100 * max(planned):.0f} %")
        without = [abs(_at(p, kind, i) / r[m]["measured"] - 1)
                   for n, r in rows.items() if (p := pred.get("planner_no_runtime", {}).get(n))
                   for m, kind, i, _q in METRICS if m in PLANNER_GATED and r[m]["measured"] > 0]
        if without:
            print(f"  planner without the runtime: {sum(e <= 0.15 for e in without)} of {len(without)} within 15 %, "
                  f"worst error {100 * max(without):.0f} %")
        bare = [abs(_at(p, kind, i) / r[m]["measured"] - 1)
                for n, r in rows.items() if (p := pred.get("planner_bare", {}).get(n)) and deployed
                for m, kind, i, _q in METRICS if m in PLANNER_GATED and r[m]["measured"] > 0]
        if bare:
            print(f"  planner on the profile measured alone: {sum(e <= 0.15 for e in bare)} of {len(bare)} within 15 %, "
                  f"worst error {100 * max(bare):.0f} %")
    served = [abs(r[m]["as_served_error"]) for r in rows.values() for m in GATED]
    worst_served = max(served) if served and not any(math.isnan(x) for x in served) else math.nan
    if not math.isnan(worst_served):
        print(f"  as served (the simulator given the host's speed as it went in the serves): worst error "
              f"{100 * worst_served:.0f} %")
    if spreads:
        print(f"  the executor's own spread (max - min over its serves ÷ their median) on {', '.join(GATED)}: "
              f"median {100 * statistics.median(spreads):.0f} %, worst {100 * max(spreads):.0f} %")
    for note in pred.get("notes", []):
        print(f"  note: {note}")
    print_forwards(pred.get("forwards", {}))
    planner_check.print_ladder(pred.get("ladder", {}), {n: {m: r[m]["measured"] for m in r
                                                            if m in GATED or m in PLANNER_GATED}
                                                        for n, r in rows.items()})
    return {"rows": rows, "same_order": same, "tied": tied, "worst_gated_error": worst,
            "worst_as_served_error": worst_served,
            "worst_planner_error": max(planned) if planned else math.nan,
            "worst_executor_spread": max(spreads) if spreads else math.nan}


def same_ordering(rows: dict) -> tuple[bool, list[tuple[str, str]]]:
    """Whether the simulation orders the setups by TTFT P90 as the executor does, on every pair of setups the
    executor's serves order (one setup's P90s all below the other's); the pairs whose serves' P90s overlap
    are tied — which of them comes first changes from serve to serve — and are returned apart."""
    same, tied = True, []
    for a, b in itertools.combinations(sorted(rows, key=lambda n: rows[n]["TTFT P90"]["measured"]), 2):
        fa, fb = rows[a]["TTFT P90"], rows[b]["TTFT P90"]
        if max(fa["serves"]) >= min(fb["serves"]):
            tied.append((a, b))
        elif not fa["simulated"] < fb["simulated"]:
            same = False
    return same, tied


def _at(pred: dict | None, kind: str, i: int) -> float:
    """A prediction's figure ``pred[kind][i]``, NaN where it has none (a planner has no TPOT percentiles, a
    prediction saved before the TPOT mean has two TPOT figures)."""
    row = pred.get(kind, ()) if pred else ()
    return float(row[i]) if i < len(row) else math.nan


def serve_figures(res: dict, kind: str, q: float | str) -> list[float]:
    """A metric in each serve of the measured trace: the first, then each ``--repeats`` serve; ``q`` a
    percentile over requests, or "mean": the TPOT mean over tokens (``serve_tpot.measured_token_mean``)."""
    serves = [res, *res.get("repeats", [])]
    if q == "mean":
        return [serve_tpot.measured_token_mean(r, res.get("outputs")) for r in serves]
    return [pct(r[f"{kind}_s"], q) for r in serves]


def print_forwards(forwards: dict[str, list[dict]]) -> None:
    """The simulator's cost of a forward, checked forward by forward (bench/served_forwards.py)."""
    if not any(forwards.values()):
        return
    print("\nserved forwards by what the other instances ran meanwhile (wall and thread CPU seconds ÷ the table's; "
          "simulated: what the simulator's Host charges that kind beside those, from the calibration serve where "
          "there was one, else from the probes with a busy line's cost left out):")
    for name, rows in forwards.items():
        for r in rows:
            print(f"  {name:<12} {r['kind']:<8} {served_forwards.describe(r['beside']):<34} {r['forwards']:>5} "
                  f"served {r['served_wall']:5.2f} (CPU {r['served_cpu']:4.2f})  simulated {r['simulated']:5.2f} "
                  f"{100 * r['error']:>+5.0f}%")


PHASES = ("orders_sent_after_s", "p_queue_s", "prefill_s", "md_p_pull_wait_s", "md_p_export_s", "md_kv_transfer_s",
          "md_kv_inbox_s", "md_import_s", "rld_p_pull_wait_s", "rld_p_export_s", "rld_kv_inbox_s", "rld_import_s",
          "t0_transit_s", "ttft_s")


def print_phases(results: dict[str, dict]) -> None:
    """Where the first token's time went, per setup and request kind: medians of the executor's phase
    times (the request records' `extra`; md_*/rld_*: as the first decoder saw them), in ms."""
    print("\nwhere TTFT went (medians, ms; executor's phase times):")
    for name, res in results.items():
        for kind, ph in sorted(res.get("phases", {}).items()):
            parts = [f"{k.removesuffix('_s')} {1000 * statistics.median(ph[k]):.1f}" for k in PHASES if ph.get(k)]
            print(f"  {name:<12} {kind:<9} " + ", ".join(parts))


def report(results: dict[str, dict], pred: dict, trace: list[TraceRequest], line: LinkShape, cal: dict) -> dict:
    kinds = {k: sum(r.kind == k for r in trace) for k in ("new", "turn", "anomalous")}
    print(f"trace: {len(trace)} requests ({kinds['turn']} later turns, high hit; {kinds['new']} new conversations "
          f"and {kinds['anomalous']} anomalous, low hit); KV {MODEL.kv_bytes_per_token // 1024} KiB/token")
    print(f"line dc-a<->dc-b: {line.gbit_per_s * 1000:g} Mbit/s, RTT {line.rtt_ms:g} ms, jitter {line.jitter_ms:g} ms;"
          f" a 1000-token uncached KV takes {line.transfer_estimate_s(1000 * MODEL.kv_bytes_per_token):.2f} s")
    if cal:
        print(f"runtime (measured, {cal.get('source', '')}): cores {cal['cores']:g}, per-request overhead "
              f"{1000 * cal['request_overhead_s']:.1f} ms CPU ({1000 * cal.get('ttft_overhead_s', 0.0):.1f} ms wall on "
              f"the first token's path), KV export {1000 * cal.get('kv_export_fixed_s', 0.0):.2f} ms + "
              f"{cal['kv_export_bytes_per_s'] / 1e6:.0f} MB/s, "
              f"import {1000 * cal.get('kv_import_fixed_s', 0.0):.2f} ms + "
              f"{cal['kv_import_bytes_per_s'] / 1e6:.0f} MB/s, per streamed token "
              f"{1e6 * cal['token_stream_s']:.0f} us CPU, WAN bytes on the I/O thread "
              f"{1e9 * cal.get('wan_cpu_s_per_byte', 0.0):.1f} ns CPU/byte, a WAN message's socket path "
              f"{1000 * cal.get('wan_latency_s', 0.0):.1f} ms + {1e9 * cal.get('wan_latency_s_per_byte', 0.0):.2f} "
              f"ns/byte (more beside 1, 2 … busy engine threads: "
              f"{', '.join(f'{1000 * x:.1f}' for x in cal.get('wan_latency_beside_s', ())) or '-'} ms), "
              f"a KV joining a busy connection behind {cal.get('wan_hol_bytes', 0.0) / 1e6:.2f} MB; "
              "at serve time, one thread's slowdown "
              "by other work "
              "and the speedup of 1-3 engine threads: "
              + ", ".join(f"{n} {r.get('slowdown', math.nan):.2f} {r.get('speedup', '-')}" for n, r in results.items()))
    if pred.get("served_paces"):
        print("pace of the served forwards (their thread CPU seconds ÷ the profile's for the same shapes, × the "
              "slowdown): " + ", ".join(f"{n} prefill {p.get('prefill_pace', math.nan):.2f} decode "
                                        f"{p.get('decode_pace', math.nan):.2f}"
                                        for n, p in pred["served_paces"].items()))
    walls = {n: {phase: sum(r[3] for r in rows) / sum(r[2] for r in rows)
                 for phase, rows in res.get("forwards_served", {}).items() if rows and len(rows[0]) > 3
                 and sum(r[2] for r in rows) > 0}
             for n, res in results.items()}
    if any(walls.values()):
        print("served forwards' wall ÷ thread CPU seconds (waits for a core or the GIL inside a forward): "
              + ", ".join(f"{n} " + " ".join(f"{phase} {v:.2f}" for phase, v in w.items()) for n, w in walls.items()))
    if pred.get("calibration"):
        print("calibration (the same shape of trace, another seed, served by each setup just before the measured one: "
              "the pace — served wall seconds ÷ the table's with nothing of ours beside — / the factor beside a "
              "prefill / beside a decode step): "
              + ", ".join(f"{n} ({results[n]['calibration']['requests']} requests) "
                          + " ".join(f"{k} {c.get(f'{k}_pace', math.nan):.2f}/"
                                     + "/".join(f"{c.get('interference', {}).get(k, {}).get(o, math.nan):.2f}"
                                                for o in ("prefill", "decode"))
                                     for k in ("prefill", "decode"))
                          + (" (prefill table reshaped to its prefills: its points × {:.2f}-{:.2f})".format(
                              min(map(min, c["prefill_shape"])), max(map(max, c["prefill_shape"])))
                             if c.get("prefill_shape") else "")
                          + _drift_text(results[n]["calibration"].get("host_drift"))
                          for n, c in pred["calibration"].items()))
    if pred.get("paces"):
        print("pace at serve time (a lone forward's wall seconds ÷ the profile's, median of the probe's grid points; "
              "the profile was measured minutes before): "
              + ", ".join(f"{n} prefill {p.get('prefill_pace', math.nan):.2f} "
                          f"decode {p.get('decode_pace', math.nan):.2f}" for n, p in pred["paces"].items()))
    if any("interference" in r for r in results.values()):
        beside = ("prefill", "decode", "line")
        print("interference (a lone forward — decode@B: a step of B sequences — beside one neighbour thread's "
              "prefills / decode steps / a busy line ÷ alone): " + ", ".join(
                  f"{n} " + " ".join(kind + " " + "/".join(f"{row.get(b, math.nan):.2f}" for b in beside)
                                     for kind, row in r["interference"].items())
                  for n, r in results.items() if "interference" in r))
    print()
    print(f"{'setup':<13} {'TTFT P50':>9} {'P90':>8} {'P99':>8}   {'WAN MB':>7}  pipelines / by kind (P50 s)")
    summary: dict = {}
    for name, r in results.items():
        t = r["ttft_s"]
        p = (pct(t, 50), pct(t, 90), pct(t, 99))
        summary[name] = p
        kinds_txt = ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in r["ttft_by_kind"].items())
        print(f"{name:<13} {p[0]:>8.3f}s {p[1]:>7.3f}s {p[2]:>7.3f}s   {r['wan_bytes'] / 1e6:>7.1f}  "
              f"{r['pipelines']}; {kinds_txt}" + (f"  ERRORS {len(r['errors'])}" if r["errors"] else "")
              + (f"  CALIBRATION ERRORS {len(r['calibration']['errors'])}"
                 if r.get("calibration", {}).get("errors") else "")
              + "".join(f"  REPEAT {i + 2} ERRORS {len(x['errors'])}" for i, x in enumerate(r.get("repeats", []))
                        if x["errors"]))
    ratio = summary["pdd"][1] / summary["cross-dc-pd"][1]
    print(f"\nPDD / naive cross-DC P90 TTFT: {ratio:.2f} (target <= 0.5; TTFT {100 * (ratio - 1):+.1f} %)")
    same = [results[n]["outputs"] == results["same-dc-pd"]["outputs"] for n in results]
    print(f"outputs identical across setups (greedy): {all(same)}")
    out: dict = {"ttft": summary, "p90_ratio": ratio, "outputs_identical": all(same)}
    out["handoff"] = serve_handoff.report(results["pdd"], pred)
    print_phases(results)
    out["comparison"] = compare(results, pred)
    chain = pred.get("chained", {})
    out["chained"] = {**print_chained(chain), "setups": chain}
    out["predicted"] = {k: pred.get(k) for k in ("planner", "simulator", "ladder")}
    return out


def print_chained(chain: dict) -> dict:
    """The chained predictions' errors, per setup and over all; returns the summary."""
    if not chain:
        return {}
    print(f"\neach serve predicted from the serve just before it (calibration → serve 1 → serve 2 …; error on "
          f"{', '.join(GATED)}):")
    errors = []
    for name, rows in chain.items():
        cells = []
        for row in rows:
            errs = {m: sim / meas - 1 for m, (meas, sim) in row.items() if meas > 0}
            errors += [abs(e) for e in errs.values()]
            cells.append(" ".join(f"{100 * e:+.0f}%" for e in errs.values()))
        print(f"  {name:<12} " + " | ".join(cells))
    within = sum(e <= 0.15 for e in errors)
    summary = {"figures": len(errors), "within_15": within, "median_abs_error": statistics.median(errors),
               "worst_abs_error": max(errors)}
    print(f"  {within} of {len(errors)} within 15 %; median |error| {100 * summary['median_abs_error']:.0f} %, "
          f"worst {100 * summary['worst_abs_error']:.0f} %")
    return summary
