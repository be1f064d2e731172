"""Serve one agentic trace three ways — same-DC PD, naive cross-DC PD, PDD — over an emulated WAN.

    python bench/bench_serve.py [--quick] [--gbit-per-s 0.2] [--rtt-ms 30] [--jitter-ms 5] [--json OUT]

What runs: the executor's real engines (a tiny seeded Llama whose KV per token is
large — 32 KiB — while its compute stays tiny), real sockets in each datacenter,
and a `LinkEmulator` shaping the line between them (token bucket shared by all
transfers, RTT/2 each way, jitter). Everything runs in this process on CPU.

The trace: conversations that share a long system prefix and come back turn after
turn with their context (high prefix hit), each opened by a low-hit first turn with
a long output, plus a few anomalous long-input, low-hit, short-output requests.
The first turns relay (P → RLD → MD) and are made to hand off in both modes (issue 48): half the
conversations open short (80-160 tokens of their own: the KV crosses the 200 Mbit/s line in
0.1-0.2 s, while RLD has made fewer than `catch_up_threshold_tokens` = 64 tokens even at a 6 ms step:
one-shot), half long (1300-1500: 1.7-2.0 s, over 64 tokens at up to a 25 ms step: catch-up), and
every answer is 320 tokens, more than RLD makes before MD has the KV even at 8 ms a step, so MD
finishes each one (the PDD report: 64K-token contexts, ~1K outputs, 100-token handoffs, RLD 6.2 % of
the output tokens; here RLD holds 10-60 % of a relayed answer: 1,000-token answers would take 15-30 s
of decoding each on this CPU). The anomalous requests are filtered to RLD and finish there. The
planner's classes split the short and the long conversations (`request_class`).
The load is steady, as the planner plans for (issue 48, `serve_trace.lone_arrivals`): the first full trace opened
its twelve conversations every 2 s, so 81 % of its output tokens (the openings' answers) came in the first 26 %
of an ~84 s run, and the planner's TPOT mean — a steady load's, Poisson at the mean rate — read −31…−40 %
against the simulator on those arrivals (serve18) while within 10 % of it on its own inputs. Now ten
conversations open over the whole ~100 s run (`span_s` = 10 × `stagger_s` = 10 s), their gaps the exponential
law's ten quantiles (Poisson's spread in every draw; a long gap after each short one: no clump of openings,
though the longest gap, 30 s, leaves one quarter of the run 5-10 % of the tokens in some seeds), the six
anomalous requests the same way; a conversation thinks 6 s between turns on average (drawn, exponential: fixed think
times locked two conversations whose answers ended in one decode step, their turns came in pairs for the rest of the
run, and serve18b's pdd TTFT P50 read +7-15 % off the trace's other draws; `serve_trace.think_times`, `--think fixed`
re-predicts the runs served before) and keeps the turns (at most 6)
planned to arrive within the run, so no tail of turns outlasts the openings: 49-58 requests, each serve
~100 s (as long as the first trace's at its default 8 turns; serve18's, at `--turns 6`, 84-88 s): the full
bench ~19 min at the defaults on a quiet host, ~16 min with serve18's `--profile-rounds 1 --host-retries 0`
(14.4 min). `bench_serve.py --dry
--profile X.profile.json --runtime X.runtime.json [--served X.served.json]` simulates a trace as if served
(each turn `think_s` after its simulated answer, `bench/serve_dry.py`) and prints the planner beside the
simulator on Poisson and on the trace's arrivals: on serve18's profile and calibration serves, seeds 0-5, the
planner's TPOT mean is −17…+20 % off the simulator on the trace's arrivals (10 of 18 within 10 %, 15 within
15 %; the old trace −30/−39/−31 % for same-dc-pd, cross-dc-pd, pdd), TTFT P50 −17…+8 %, P90 −5…+16 %; the
decoders 27-38 % busy, 5 one-shot and 5 catch-up handoffs in every seed. `--quick` keeps the first shape
(an opening every 1.5 s, `arrivals="bunched"`).
The same trace (same prompts, same arrival times) is served by:

- same-dc-pd: P and D in dc-a (the KV never crosses the WAN) — the lower bound;
- cross-dc-pd ("naive"): P in dc-a, D in dc-b, every request P → D over the line.
  D keeps a radix cache (ships only what it lacks), so naive here differs from PDD
  only in the relay and the filter;
- pdd: P and RLD in dc-a, MD in dc-b; the router sends high-hit requests P → MD,
  low-hit ones P → RLD → MD (token-ID handoff), anomalous ones P → RLD only.

Prints TTFT P50/P90/P99 of each (client side, at the router), the PDD / naive P90
ratio, the handoff's token-ID bytes vs the KV bytes they replace, handoff latency, and
measured vs predicted TTFT P50/P90/P99 and TPOT P50/P90 per setup with the error: the
simulator (`placer.sim` with `SimConfig.runtime`, the executor's runtime) and the planner
(`placer.optimize.evaluate_plan`, TTFT and TPOT), both from the CPU profile of the bench model
(`placer profile model --device cpu --grid serve --rounds 3`, measured first unless `--profile`)
and the runtime figures (`bench/measure_runtime.py`, unless `--runtime`), on the same
trace: same prompts, the arrival times each setup saw. The machine may be shared: the
profile is in CPU seconds and each setup's simulation takes the one-thread slowdown, the
speedup of 1-3 concurrent engine threads, each phase's pace (lone forwards at a few grid
points ÷ the profile's) and what a neighbour thread's prefills or decode steps, or a busy line at
the served rate, cost each kind of forward (``interference``), measured just before and after serving it
(`measure_runtime.probe_host`). `--quick` is a smaller run of the same
comparison (27 requests); the full run has 49-58 (its P90's bootstrap interval is printed).

Calibration: the probes' neighbours are bare forwards, while a serving process also runs the router,
the transport's loops and the I/O thread beside them; served forwards went 10-40 % slower than the
probes read minutes apart (docs/benchmarks.md, 2026-12-03). So before the measured trace, each setup
serves a calibration trace — the same shape of trace with another seed, so other
prompts and arrival times — and the simulation takes its paces and interference from those served
forwards (`served_forwards.calibration`: wall seconds ÷ the table's, grouped by what the other
instances ran meanwhile). It also reshapes the prefill table to the calibration's lone prefills
(`served_forwards.table_shape`): one pace weighs the forwards by their seconds, and the few long
prefills set it for the many short ones, which went 0.66-1.30x the table where the long ones went
0.94-1.13x (2026-12-03); `--no-shape` keeps one prefill pace. A prediction from a calibration says
nothing of the simulator when the host itself changed speed between the two serves: where the lone
forwards' thread CPU ÷ the table's moved more than 1.5x between them (a steady host: within 1.26x),
the setup serves both again (`--host-retries`, 2) and the report prints the drift it kept. The
"probes" column is the simulation without the calibration; `--no-calibration` skips it (about
100 s per setup). `--repeats N` serves the measured trace N times per setup: "measured" is then
their median, and the report prints the executor's own spread over them, the noise floor any
prediction of it is read against, and predicts each serve from the serve just before it (the first
from the calibration serve): as many predictions per setup as serves.

Handoffs (issue 48, `bench/serve_handoff.py`): the PDD serve's handoffs per mode, the relayed requests MD
finished, RLD's share of the output tokens, tokens handed over and MD's extend-decode time, beside the
simulator's for the same trace (its handoff plans recorded as it makes them), the latency of each final
batch split into wire / wait at MD / extend-decode (mean/max/std, per mode), and the report's 100-token
payload: token IDs vs the KV they replace. The planner (`placer.optimize.evaluate_plan`: TTFT P50/P90/P99 and
its one TPOT), given the runtime the simulator column takes (`Problem.runtime`: the executor's per-request costs on
the first token's path, `placer/executor_costs.py` — the ladder keeps the planner without them beside it), is gated
within 15 % on TTFT P50, P90 and the TPOT mean over tokens — its TPOT is a mean over tokens
(Little on its batch law), so it is read against the measured mean over tokens (each request's TPOT weighted by its
output − 1: `bench/serve_tpot.py`), while the simulator is gated on TPOT P50 over requests (issue 48: most of the
trace's requests are 16-token turns decoding alone, most of its tokens 320-token answers sharing steps), and
`bench/planner_check.py` walks from the planner to the simulator one input at a time (the simulator on the
ILP's own inputs — classes, Poisson, no executor overheads, then with them —, then on the trace as served, then
with the executor's runtime), so that where they part the report shows whether an ILP law or an input is off.
The planner's CPU chip moves a KV inside a datacenter at the executor's own copy rate
(`local_kv_gbit`: the runtime's export and import copies), not a NIC's, and its forwards cost what they
cost the setup's instances in its calibration serve (`served_forwards.deployed_paces`: every forward's wall
seconds ÷ the table's, whatever ran beside it — the host's pace, the process's other threads and the
instances slowing each other on two shared cores, in the shares that deployment ran them; measured before
the serve, on another trace): the ILP has no neighbours in its laws, so its profile carries them — each
instance's its own (`deployed_paces_by_instance`, each role its own chip in the scenario: pdd's RLD decodes
beside MD's steps far more often than MD beside RLD's). The planner's TPOT is its mean over tokens
(`placer.decode_state`: the batch's stationary law on the table), on the TPOT mean row only, cells outside 15 %
starred as the simulator's. The
ladder's first rung is the planner on the profile measured alone (issue 48: 6.9 ms cross-dc TPOT where the
executor's steps ran 1.4x the table and a token saw 2.8 sequences: −58 %).

The report has a fourth column, "as served": the same simulation at the host's speed as each serve
really went — its lone decode steps' thread CPU seconds (each engine's `forward_log`) ÷ the
calibration's for the same shapes, 10 s by 10 s (`served_forwards.pace_timeline`, the runtime's
`host_pace`), and its lone prefills' the same way, 20 s by 20 s (`host_pace_prefill`: the compute-bound
prefill and the memory-bound step move apart), each serve simulated at its own arrivals and timelines,
the figure the median over the serves. It uses the serves' own forwards, so it is no prediction; it
tells how much of the error is the host's moving between the calibration and the serve (printed per
setup: each serve's mean speed and its slowest and fastest window) and how much the simulator's own. A shared host moved
that much: in run y (2026-12-05) same-dc's serves went 1.08, 1.16 and 1.20x the calibration's pace
(windows 0.87-1.43x) and TPOT P50 came out -30 %, where the same simulation at the serves' speed
came within 11 %: turns that arrive together share the decoder's steps, so a slower host lengthens
what they share as well as each step, and TPOT moved about twice as much as the pace. Without a
calibration the column is the probes' simulation at the served forwards' mean pace. The last
table checks the simulator's cost model forward by forward (`bench/served_forwards.py`): the
served forwards grouped by what the other instances ran meanwhile, their wall ÷ table seconds
beside what the simulator charges that kind with those neighbours.

Each setup first serves a fresh prompt as long as the trace's longest and one request of the
shared system prompt to the end (`warm_up`): in steady state the engines are warm and the prompt
is cached, and the simulator starts so. The trace is spaced (a conversation every 10 s on average, 6 s of
thinking between turns: the decoders 27-38 % busy in the dry run) so that the decoders work well under half of the time: closer to
saturation, a queue's length moves by e / (1 - busy) for a cost error e, and at the 85-90 % the
first spacing (1.2 s, 2 s) gave, a 10 % error in a step's cost — the spread of a shared host's
memory bandwidth within minutes — moved TPOT by 30-50 %. The bench
model's decode step costs about the same per sequence at any batch (its attention reads 32 KiB
of KV per token and dominates), so a decoder has no batching to absorb load: 3.5 s of thinking
kept it 60-70 % busy when the host was fast and 75-87 % when it ran 10-30 % slower
(2026-12-03), where a 16 % pace error moved TPOT P50 by 40-60 %; 6 s kept the simulated decoders
56-73 % busy, where the 10-15 % the host's pace moved between a calibration serve and the measured
one a minute later doubled TPOT P50 (run j). The report prints each setup's simulated busy
fractions and that factor.

Modules (this file is the entry: its CLI and ``run``): ``bench/serve_trace.py`` (the model, the trace, the
setups), ``bench/serve_run.py`` (serving a setup, the calibration pair), ``bench/serve_scenario.py`` (the
profile, the scenario and the plans the planner and the simulator take), ``bench/serve_predict.py`` (the
simulator's and the planner's predictions), ``bench/serve_report.py`` (the report), ``bench/serve_handoff.py``
(the handoffs), ``bench/serve_tpot.py`` (TPOT over tokens), ``bench/planner_check.py`` (the planner's ladder), ``bench/serve_dry.py`` (``--dry``), ``bench/served_forwards.py`` (the served
forwards against the table).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# the entry and its public names (other benches and the tests take the model, the trace and the steps from here)
from bench.serve_predict import chained, host_paced, predict  # noqa: E402,F401
from bench.serve_report import GATED, METRICS, compare, p90_spread, pct, print_chained, report  # noqa: E402,F401
from bench.serve_run import calibrated_serve, replay, serve, warm_up  # noqa: E402,F401
from bench.serve_scenario import (  # noqa: E402,F401
    NIC_GBIT, _table, local_kv_gbit, measure_profile, scenario_and_plans)
from bench.serve_trace import (  # noqa: E402,F401
    BLOCK, FULL, MODEL, QUICK, THINKS, TraceConfig, TraceRequest, engine_config, make_trace, request_class, setups,
    trace_file)
from executor.transport.shaping import LinkShape  # noqa: E402

__all__ = ["BLOCK", "FULL", "GATED", "METRICS", "MODEL", "NIC_GBIT", "QUICK", "LinkShape", "TraceConfig", "TraceRequest",
           "calibrated_serve", "chained", "compare", "engine_config", "host_paced", "local_kv_gbit", "main",
           "make_trace", "p90_spread", "pct", "predict", "print_chained", "replay", "report", "request_class", "run",
           "scenario_and_plans", "serve", "setups", "trace_file", "warm_up"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller trace (a few minutes)")
    ap.add_argument("--gbit-per-s", type=float, default=0.2, help="line rate (default 200 Mbit/s)")
    ap.add_argument("--rtt-ms", type=float, default=30.0)
    ap.add_argument("--jitter-ms", type=float, default=5.0)
    ap.add_argument("--loss", type=float, default=0.0, help="packet loss probability on the line")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=Path, help="CPU profile of the bench model (default: measure it now, "
                    "placer profile model --device cpu --grid serve)")
    ap.add_argument("--runtime", type=Path, help="runtime figures (default: measure them now, "
                    "bench/measure_runtime.py)")
    ap.add_argument("--reps", type=int, default=2, help="timed runs per profile grid point in each round")
    ap.add_argument("--profile-rounds", type=int, default=3,
                    help="passes over the profile's grid (the median of a point's runs over all of them is kept)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each runtime measurement")
    ap.add_argument("--no-predict", action="store_true", help="skip the planner and simulator predictions")
    ap.add_argument("--no-calibration", action="store_true",
                    help="do not serve a calibration trace before each setup: the simulation takes the probes' paces")
    ap.add_argument("--no-shape", action="store_true",
                    help="the calibration carries one prefill pace: it does not reshape the prefill table to its "
                         "served prefills")
    ap.add_argument("--repeats", type=int, default=1,
                    help="serve the measured trace this many times per setup (about 100 s each): 'measured' is "
                         "their median and the report prints the executor's own spread")
    ap.add_argument("--host-retries", type=int, default=2,
                    help="serve a setup's calibration and measured traces again, up to this many times, while the "
                         "host's own pace moved more than 1.5x between them (a burst of other work on the machine)")
    ap.add_argument("--served", type=Path, help="predict for the runs saved in this file (--json X saves them "
                    "as X.served.json) instead of serving again; needs --profile and --runtime")
    ap.add_argument("--dry", action="store_true",
                    help="serve nothing: simulate the trace as if served (each turn after its simulated answer) and "
                         "print the planner beside the simulator on Poisson and on the trace's arrivals "
                         "(bench/serve_dry.py); needs --profile and --runtime, takes --served's calibration serves")
    ap.add_argument("--turns", type=int, help="turns per conversation at most (default: the trace's, 6; --quick 5): "
                    "fewer for fewer requests (the full trace's serves last its span, ~100 s, whatever the turns)")
    ap.add_argument("--think", choices=THINKS,
                    help="a conversation's think times between turns (default: the trace's — the full trace draws "
                         "them, exponential; --quick fixed): 'fixed' re-predicts a run served before the draw "
                         "(serve18b and older, serve_trace.think_times)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.turns is not None and args.turns < 1:
        ap.error(f"--turns must be at least 1, got {args.turns}")
    if args.dry and (args.profile is None or args.runtime is None):
        ap.error("--dry needs --profile and --runtime (a saved run's X.profile.json and X.runtime.json)")
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.host_retries < 0:
        ap.error(f"--host-retries must be 0 or more, got {args.host_retries}")
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Measure (profile, runtime), serve the three setups, predict, report."""
    from bench.measure_runtime import measure_runtime, probe_host
    import torch

    torch.set_num_threads(1)
    sys.setswitchinterval(0.001)
    shape = QUICK if args.quick else FULL
    if args.turns is not None:
        shape = replace(shape, turns=args.turns)
    if args.think is not None:
        shape = replace(shape, think=args.think)
    trace = make_trace(shape, args.seed)
    # the calibration trace each setup serves just before the measured one: the same shape, another seed (with
    # fewer turns its contexts were shorter and its load lighter, and its decode pace missed the measured one's
    # by up to 40 %, 2026-12-03 runs j and k: the table's error differs from one region of the grid to another)
    cal_trace = make_trace(shape, args.seed + 1)
    line = LinkShape(args.gbit_per_s, args.rtt_ms, args.jitter_ms, args.loss)
    if args.dry:
        from bench.serve_dry import run_dry

        return run_dry(trace, line, args.profile, args.runtime, args.seed, args.served, not args.no_shape, args.json)
    ec = engine_config(trace)
    t0 = time.monotonic()
    runtime: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        profile = args.profile
        if not args.no_predict:
            if profile is None:
                profile = measure_profile(Path(tmp) / "cpu-profile.json", args.reps, args.profile_rounds)
                print(f"[profile: measured the serve grid in {time.monotonic() - t0:.0f} s]", file=sys.stderr)
            if args.runtime is not None:
                runtime = json.loads(args.runtime.read_text())
            else:
                runtime = measure_runtime(rounds=args.rounds, gbit_per_s=args.gbit_per_s, rtt_ms=args.rtt_ms)
                print(f"[runtime: measured in {runtime['measurements']['seconds']:.0f} s]", file=sys.stderr)
        results = json.loads(args.served.read_text()) if args.served else {}
        for name, res in results.items():  # a run served on another trace (its think times before the draw)
            if len(res.get("arrivals", trace)) != len(trace):
                raise SystemExit(f"--served: {name} served {len(res['arrivals'])} requests, this trace has "
                                 f"{len(trace)} (--think {shape.think}, --turns {shape.turns}, --seed {args.seed}): "
                                 "a run served before the full trace drew its think times needs --think fixed")
        table = None if args.no_predict or args.no_calibration else _table(profile)
        for name in [] if args.served else setups():
            before = probe_host(gbit_per_s=line.gbit_per_s)
            cal, results[name], drifts = calibrated_serve(name, trace, cal_trace, line, ec, args.seed, table,
                                                          args.host_retries)
            for _ in range(args.repeats - 1):  # the same trace again: the executor's own spread
                again = serve(name, trace, line, ec, args.seed)
                results[name].setdefault("repeats", []).append(
                    {k: again[k] for k in ("wall_s", "errors", "arrivals", "ttft_s", "tpot_s", "tpot_gaps",
                                                "forwards_served")})
            if cal is not None:  # served just before, by the same setup: the paces the simulation takes
                results[name]["calibration"] = {k: cal[k] for k in ("requests", "wall_s", "errors", "forwards_served")}
                results[name]["calibration"]["host_drift"] = drifts
            after = probe_host(gbit_per_s=line.gbit_per_s)  # the cores other work left us, around the serving
            results[name]["slowdown"] = (before["slowdown"] + after["slowdown"]) / 2
            results[name]["speedup"] = [round((a + b) / 2, 3) for a, b in zip(before["speedup"], after["speedup"])]
            results[name]["interference"] = {
                kind: {other: round((v + after["interference"][kind][other]) / 2, 3) for other, v in row.items()}
                for kind, row in before["interference"].items()}
            results[name]["probe_forwards"] = {
                phase: [[*p[:2], (p[2] + q[2]) / 2] for p, q in zip(rows, after["forwards"][phase])]
                for phase, rows in before["forwards"].items()}
            print(f"[{name}: {len(trace)} requests in {results[name]['wall_s']:.1f} s; one thread's slowdown "
                  f"{results[name]['slowdown']:.2f}, speedup of 1-3 threads {results[name]['speedup']}]",
                  file=sys.stderr)
        if args.json and not args.served:
            args.json.with_suffix(".served.json").write_text(json.dumps(results, default=str))
            if profile is not None and args.profile is None:  # to re-predict with --served
                args.json.with_suffix(".profile.json").write_text(profile.read_text())
            if runtime and args.runtime is None:
                args.json.with_suffix(".runtime.json").write_text(json.dumps(runtime, indent=2))
        shape = not args.no_shape
        pred = {} if args.no_predict else predict(trace, results, line, profile, runtime, args.seed, shape)
        if pred and any(r.get("repeats") for r in results.values()):
            pred["chained"] = chained(trace, results, line, profile, runtime, args.seed, shape)
    out = report(results, pred, trace, line, runtime)
    out["runtime"] = runtime
    print(f"\n(bench wall time {time.monotonic() - t0:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    failed = any(r["errors"] or r.get("calibration", {}).get("errors") or any(x["errors"] for x in r.get("repeats", []))
                 for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
