"""``placer simulate`` and ``placer sweep``: thin faces over the simulator (``workload fit``: :mod:`placer.cli.workload`).

* ``simulate SCENARIO PLAN.json`` → :func:`placer.sim.engine.simulate` (tables, or the
  Simulation JSON with ``--json``; ``--profiles`` as ``optimize``'s); any plan replays, an
  overloaded one too, with what went wrong as warnings on stderr; ``--runtime`` replays the
  executor's serving runtime measured on this host (``bench/measure_runtime.py``'s JSON)
* ``sweep SCENARIO --vary ... --values ... --out DIR`` → :func:`placer.sim.sweep.run_sweep`
  (variants on Ray; sweep.csv and sweep.png); ``--vary replan-every|hysteresis`` →
  :func:`placer.replan.sweep.sweep_replanning` (a simulated day per value, sequential)
* ``simulate SCENARIO PLAN.json --replan-every DURATION`` → :func:`placer.replan.loop.run_day`: a day of
  the scenario's workload (diurnal rate, burst, mix shift, price change) served by four fleets —
  static, peak, replanned (the job's rule in the loop, PLAN.json its first plan), oracle
  (tables via :mod:`placer.cli.replan_view`, or the day's JSON with ``--json``)

Mounted lazily by :mod:`placer.cli.app`: this module is imported only when one of
these commands runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from placer.cli.options import EngineOpt, with_engine
from placer.cli.output import choices, err, out
from placer.cli.plan import ProfilesOpt, measured_for
from placer.cli.output import fail as _fail
from placer.cli.render import simulate_view
from placer.errors import InputError, PlacerError
from placer.pdd import HANDOFF_MODES
from placer.optimize import as_problem
from placer.plan import load_plan
from placer.plancheck import check_plan
from placer.replan.fleets import DEFAULT_DRAIN_S, DEFAULT_LOAD_GBYTE_PER_S_PER_CHIP, DEFAULT_WARMUP_S
from placer.replan.sweep import REPLAN_VARY
from placer.sim import SimConfig
from placer.sim.config import DISPATCH, WORKLOADS
from placer.sim.engine import simulate as run_simulation
from placer.sim.runtime import ExecutorRuntime
from placer.sim.sweep import VARY, parse_values, run_sweep, varied_label, write_outputs
from placer.specs import load_scenario

WorkloadKind = choices("WorkloadKind", [w for w in WORKLOADS if w != "trace"])  # a trace comes with --trace
ArrivalKind = choices("ArrivalKind", ("poisson", "bursty"))
HandoffMode = choices("HandoffMode", HANDOFF_MODES)
Dispatch = choices("Dispatch", DISPATCH)
Vary = choices("Vary", VARY + REPLAN_VARY)


def _progress(total: int):
    """A progress bar on stderr for long runs in a terminal; None otherwise."""
    if total < 20_000 or not err.is_terminal:
        return None, None
    bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed}/{task.total} requests"),
                   TimeRemainingColumn(), console=err, transient=True)
    task = bar.add_task("sim", total=total)

    def update(done: int, _total: int) -> None:
        bar.update(task, completed=done)

    return bar, update


def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML (or JSON) file.", show_default=False)],
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.json", help="Plan to replay.", show_default=False)],
    trace: Annotated[Path | None, typer.Option("--trace", help="Replay this JSONL trace instead of "
                                               "requests drawn from the classes.")] = None,
    requests: Annotated[int, typer.Option("--requests", help="Requests to replay (a trace: at most this "
                                          "many of its lines).")] = 20_000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed; the same seed gives the same result.")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the Simulation JSON instead of tables.")] = False,
    workload: Annotated[WorkloadKind, typer.Option(
        help="classes: i.i.d. requests of the classes; agentic: multi-turn sessions with real prefix caches."
    )] = WorkloadKind.classes,
    arrivals: Annotated[ArrivalKind, typer.Option(help="Arrival process.")] = ArrivalKind.poisson,
    load: Annotated[float | None, typer.Option("--load", help="Arrival rate, req/s (default: the plan's "
                                               "carried load).")] = None,
    drc_lag: Annotated[float, typer.Option("--drc-lag", help="Decode-side cache hit = P's hit minus this.")] = 0.0,
    handoff: Annotated[HandoffMode | None, typer.Option(help="Override the plan's handoff mode.")] = None,
    dispatch: Annotated[Dispatch, typer.Option(help="Instance choice inside a pool.")] = Dispatch.random,
    time_scale: Annotated[float, typer.Option("--time-scale", help="Trace replay speed-up.")] = 1.0,
    profiles: ProfilesOpt = None,
    runtime: Annotated[Path | None, typer.Option(
        "--runtime", help="Replay the executor as it serves on one host, with these measured runtime figures "
        "(JSON of bench/measure_runtime.py: cores, per-request overheads, KV serialisation rates); "
        "default: the planner's idealised deployment.")] = None,
    engine: EngineOpt = None,
    replan_every: Annotated[str | None, typer.Option(
        "--replan-every", help="Simulate a day of the scenario's workload (its arrival_rps the peak) served by four "
        "fleets — static (the day's mean), peak, replanned (the replanning job's rule every DURATION, PLAN.json "
        "its first plan), oracle (each window's optimum, instantly): e.g. 1h, 30m.", show_default=False)] = None,
    window: Annotated[str | None, typer.Option(
        "--window", help="--replan-every: the requests the job fits, the last DURATION (default: the cadence).",
        show_default=False)] = None,
    hysteresis: Annotated[float, typer.Option(
        "--hysteresis", min=0, help="--replan-every: the job's min_bcr_gain_pct: adopt only a plan beating the "
        "current one, re-evaluated under the new workload, by this many percent.")] = 5.0,
    cooldown: Annotated[str | None, typer.Option("--cooldown", help="--replan-every: the job's cool-down after an "
                                                 "adoption (default: none).", show_default=False)] = None,
    strategy: Annotated[str, typer.Option("--strategy", help="--replan-every: how a change is applied: auto (the "
                                          "executor's rule: make-before-break when the free chips hold the new "
                                          "instances, else break-before-make), make-before-break or "
                                          "break-before-make.")] = "auto",
    startup: Annotated[str | None, typer.Option(
        "--startup", help="--replan-every: every instance's start-up time (default: its weights over "
        "--load-gbyte-per-s per chip + --warmup).", show_default=False)] = None,
    load_rate: Annotated[float, typer.Option(
        "--load-gbyte-per-s", help="--replan-every: weights load rate per chip, GB/s.")
    ] = DEFAULT_LOAD_GBYTE_PER_S_PER_CHIP,
    warmup: Annotated[float, typer.Option("--warmup", help="--replan-every: seconds from weights loaded to ready "
                                          "(compile, graph capture, profiling).")] = DEFAULT_WARMUP_S,
    drain: Annotated[float, typer.Option("--drain", help="--replan-every: seconds a leaving instance is charged "
                                         "while it finishes its requests.")] = DEFAULT_DRAIN_S,
    startup_measured: Annotated[Path | None, typer.Option(
        "--startup-measured", help="--replan-every: the load rate, warm-up and drain the executor measured on this "
        "machine (JSON of bench/bench_startup.py --write), instead of --load-gbyte-per-s, --warmup and --drain.",
        show_default=False)] = None,
    peak_to_trough: Annotated[float, typer.Option("--peak-to-trough", help="--replan-every: the diurnal rate's "
                                                  "peak over its trough.")] = 3.5,
    peak_hour: Annotated[float, typer.Option("--peak-hour", help="--replan-every: hour of the peak.")] = 14.0,
    burst: Annotated[str | None, typer.Option(
        "--burst", help="--replan-every: HOUR:HOURS:FACTOR, the rate × FACTOR for HOURS from HOUR.",
        show_default=False)] = None,
    mix_shift: Annotated[str | None, typer.Option(
        "--mix-shift", help="--replan-every: FROM:TO:X, the classes under 0.9 hit × (1 + X) in share from hour FROM "
        "to TO.", show_default=False)] = None,
    price_change: Annotated[str | None, typer.Option(
        "--price-change", help="--replan-every: CHIP@HOUR=USD, a scenario chip's price per hour from HOUR on.",
        show_default=False)] = None,
    inventory_change: Annotated[list[str] | None, typer.Option(
        "--inventory-change", help="--replan-every: DC:CHIP:COUNT@HOUR, the datacenter holds COUNT chips of CHIP "
        "from HOUR on (repeatable); every fleet over it loses instances at once.", show_default=False)] = None,
    requests_per_window: Annotated[int, typer.Option(
        "--requests-per-window", min=50, help="--replan-every: most requests simulated per window and fleet.")] = 2000,
    figure: Annotated[Path | None, typer.Option("--figure", help="--replan-every: also draw the day into this PNG.",
                                                show_default=False)] = None,
) -> None:
    """Replay a plan in the discrete-event simulator (TTFT/TPOT tails, goodput, BCR, link use).

    The instances' times are the ``--engine``'s (default: the scenario's ``engine``); a plan made
    under another engine replays, with a warning naming both. With ``--replan-every``: a day of
    replanning judged against static, peak and oracle fleets."""
    if replan_every is not None:
        _replan_day(scenario, plan_file, engine, json_out, figure, seed, dict(
            replan_every=replan_every, window=window, hysteresis=hysteresis, cooldown=cooldown, strategy=strategy,
            startup=startup, load_rate=load_rate, warmup=warmup, drain=drain, startup_measured=startup_measured,
            peak_to_trough=peak_to_trough,
            peak_hour=peak_hour, burst=burst, mix_shift=mix_shift, price_change=price_change,
            inventory_change=inventory_change or [], requests_per_window=requests_per_window))
        return
    bar = None
    try:
        config = SimConfig(requests=requests, seed=seed, load_rps=load,
                           workload="trace" if trace else workload.value,
                           trace=str(trace) if trace else None, trace_time_scale=time_scale,
                           arrivals=arrivals.value, drc_lag=drc_lag,
                           handoff_mode=handoff.value if handoff else None, dispatch=dispatch.value,
                           runtime=ExecutorRuntime.from_json(runtime) if runtime is not None else None)
        loaded = with_engine(load_scenario(scenario), engine)
        problem = as_problem(loaded, measured_for(loaded, profiles))
        plan = load_plan(plan_file)
        if plan.engine.spec != loaded.engine:
            err.print(f"warning: the plan's numbers assume engine {plan.engine.spec}; replaying with {loaded.engine}",
                      highlight=False, markup=False, soft_wrap=True)
        check_plan(problem, plan, other_scenario=True)  # the simulator replays a plan on another load on purpose
        bar, update = _progress(requests)
        if bar is not None:
            bar.start()
        result = run_simulation(problem, plan, config, progress=update)
    except PlacerError as e:
        _fail(e)
    finally:
        if bar is not None:
            bar.stop()
    for line in result.data.get("warnings", []):
        err.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    if json_out:
        print(result.to_json())
    else:
        out.print(simulate_view(result, plan))


def _fields(text: str, sep: str, n: int, option: str, form: str) -> list[str]:
    parts = text.split(sep)
    if len(parts) != n or not all(p.strip() for p in parts):
        raise InputError(f"{option}: expected {form}, got {text!r}")
    return [p.strip() for p in parts]


def _number(text: str, option: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{option}: not a number {text!r}") from None


def _timeline(o: dict):
    from placer.replan.timeline import Timeline

    extra = {}
    if o["burst"]:
        h, hs, f = (_number(x, "--burst") for x in _fields(o["burst"], ":", 3, "--burst", "HOUR:HOURS:FACTOR"))
        extra.update(burst_hour=h, burst_hours=hs, burst_factor=f)
    if o["mix_shift"]:
        a, b, x = (_number(v, "--mix-shift") for v in _fields(o["mix_shift"], ":", 3, "--mix-shift", "FROM:TO:X"))
        extra.update(mix_shift_from_hour=a, mix_shift_to_hour=b, mix_shift=x)
    if o["price_change"]:
        chip, rest = _fields(o["price_change"], "@", 2, "--price-change", "CHIP@HOUR=USD")
        hour, usd = _fields(rest, "=", 2, "--price-change", "CHIP@HOUR=USD")
        extra.update(price_chip=chip, price_hour=_number(hour, "--price-change"),
                     price_usd_per_h=_number(usd, "--price-change"))
    changes = []
    for text in o["inventory_change"]:
        where, hour = _fields(text, "@", 2, "--inventory-change", "DC:CHIP:COUNT@HOUR")
        dc, chip, count = _fields(where, ":", 3, "--inventory-change", "DC:CHIP:COUNT@HOUR")
        n = _number(count, "--inventory-change")
        if n != int(n) or n < 0:
            raise InputError(f"--inventory-change: COUNT a whole number of chips >= 0, got {count!r}")
        changes.append((dc, chip, int(n), _number(hour, "--inventory-change")))
    return Timeline(peak_to_trough=o["peak_to_trough"], peak_hour=o["peak_hour"], inventory_changes=tuple(changes),
                    **extra)


def _replan_day(scenario: Path, plan_file: Path, engine, json_out: bool, figure: Path | None, seed: int,
                o: dict) -> None:
    """``simulate --replan-every``: the four fleets over a day (:func:`placer.replan.loop.run_day`)."""
    import json

    from placer.cli.replan_view import day_view, write_figure
    from placer.replan import AdoptionRule
    from placer.replan.fleets import Startup
    from placer.replan.loop import DayConfig, run_day
    from placer.replan.timeline import parse_duration

    try:
        every = parse_duration(o["replan_every"], "--replan-every")
        config = DayConfig(replan_every_s=every, seed=seed, requests_per_window=o["requests_per_window"],
                           window_s=parse_duration(o["window"], "--window") if o["window"] else None)
        rule = AdoptionRule(min_bcr_gain_pct=o["hysteresis"],
                            cooldown_s=parse_duration(o["cooldown"], "--cooldown", zero_ok=True) if o["cooldown"] else 0.0)
        if o["startup_measured"] is not None:
            startup = Startup.measured(o["startup_measured"], o["strategy"])
        else:
            startup = Startup(load_gbyte_per_s_per_chip=o["load_rate"], warmup_s=o["warmup"], drain_s=o["drain"],
                              strategy=o["strategy"],
                              startup_s=parse_duration(o["startup"], "--startup") if o["startup"] else None)
        timeline = _timeline(o)
        loaded = with_engine(load_scenario(scenario), engine)
        plan = load_plan(plan_file)
        check_plan(as_problem(loaded), plan, other_scenario=True)
        data = run_day(loaded, timeline, plan, rule, startup, config).data
        if figure is not None:
            write_figure(data, figure)
    except PlacerError as e:
        _fail(e)
    except OSError as e:
        _fail(InputError(f"--figure: cannot write {str(figure)!r}: {e.strerror}"))
    if json_out:
        print(json.dumps(data, indent=2))
    else:
        out.print(day_view(data))


def sweep(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML (or JSON) file.", show_default=False)],
    vary: Annotated[Vary, typer.Option("--vary", help="What to vary.")],
    values: Annotated[str, typer.Option("--values", help="Comma-separated values, or start:stop:count.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for sweep.csv and sweep.png.")],
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster address (default: a local "
                                                "Ray).")] = None,
    requests: Annotated[int, typer.Option("--requests", help="Simulated requests per variant.")] = 20_000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    chip: Annotated[str | None, typer.Option("--chip", help="--vary price: the chip whose price varies.")] = None,
    use_ray: Annotated[bool, typer.Option("--ray/--no-ray", help="Run variants as Ray tasks.")] = True,
    time_limit: Annotated[float, typer.Option("--time-limit", help="Solver time limit per variant, s.")] = 30.0,
) -> None:
    """Optimise and simulate many variants in parallel on Ray; write a CSV and a PNG plot."""
    if vary.value in REPLAN_VARY:
        _sweep_replanning(scenario, vary.value, values, out_dir, seed, time_limit)
        return
    try:
        loaded = load_scenario(scenario)
        rows = run_sweep(loaded, vary.value, parse_values(values), requests=requests, seed=seed, chip=chip,
                         address=address, use_ray=use_ray, time_limit_s=time_limit)
        label = varied_label(vary.value, loaded, chip)
        csv_path, png_path = write_outputs(rows, out_dir, vary.value, f"{loaded.name}: BCR against the {label}")
    except PlacerError as e:
        _fail(e)
    for r in rows:
        if r["status"] == "ok":
            changed = " (the plan's pools change here)" if r.get("plan_changed") == 1 else ""
            out.print(f"{label} = {r['value']:g}{changed}: BCR ILP {r['ilp_bcr_requests_per_usd']:.2f}, "
                      f"simulated {r['sim_bcr_requests_per_usd']:.2f} req/USD; P90 TTFT simulated "
                      f"{r['sim_ttft_p90_s']:.3f} s", highlight=False, markup=False)
        else:
            out.print(f"{label} = {r['value']:g}: {r['status']} ({r['error']})", highlight=False,
                      markup=False)
    out.print(f"wrote {csv_path} and {png_path}", highlight=False, markup=False)


def _sweep_replanning(scenario: Path, vary: str, values: str, out_dir: Path, seed: int, time_limit: float) -> None:
    """``sweep --vary replan-every|hysteresis``: a simulated day per value (``placer.replan.sweep``), the
    replanned fleet beside the static, peak and oracle ones; PLAN.json-less: the day starts on the
    scenario's own plan (its peak). Values: durations (``30m,1h,2h``) or percents (``0,5,20``)."""
    from placer.optimize import SolveConfig, optimize
    from placer.replan import AdoptionRule
    from placer.replan.fleets import Startup
    from placer.replan.loop import DayConfig
    from placer.replan.sweep import sweep_replanning, write_replan_outputs
    from placer.replan.timeline import Timeline, parse_duration

    try:
        if vary == "replan-every":
            parsed = [parse_duration(v, "--values") for v in values.split(",")]
        else:
            parsed = parse_values(values)
        loaded = load_scenario(scenario)
        solve = SolveConfig("bcr", "ortools", time_limit, marginals=False)
        start = optimize(loaded, solve)
        rows = sweep_replanning(loaded, Timeline(), start, AdoptionRule(), Startup(),
                                DayConfig(seed=seed, solve=solve), vary, parsed)
        csv_path, png_path = write_replan_outputs(rows, out_dir, vary, f"{loaded.name}: a day against {vary}")
    except PlacerError as e:
        _fail(e)
    except OSError as e:
        _fail(InputError(f"--out: cannot write {str(out_dir)!r}: {e.strerror}"))
    for r in rows:
        shown = f"{r['value'] / 3600:g} h" if vary == "replan-every" else f"{r['value']:g} %"
        out.print(f"{vary} = {shown}: replanned attainment {r['replanned_sla_attainment']:.3f}, BCR "
                  f"{r['replanned_bcr_requests_per_usd']:.1f} req/USD, {r['changes']} changes; oracle BCR "
                  f"{r['oracle_bcr_requests_per_usd']:.1f}, peak {r['peak_bcr_requests_per_usd']:.1f}, static "
                  f"{r['static_bcr_requests_per_usd']:.1f}", highlight=False, markup=False)
    out.print(f"wrote {csv_path} and {png_path}", highlight=False, markup=False)
