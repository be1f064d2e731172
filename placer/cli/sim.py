"""``placer simulate``, ``placer sweep`` and ``placer workload fit``: thin faces over the simulator.

* ``simulate SCENARIO PLAN.json`` → :func:`placer.sim.engine.simulate` (tables, or the
  Simulation JSON with ``--json``; ``--profiles`` as ``optimize``'s); any plan replays, an
  overloaded one too, with what went wrong as warnings on stderr; ``--runtime`` replays the
  executor's serving runtime measured on this host (``bench/measure_runtime.py``'s JSON)
* ``sweep SCENARIO --vary ... --values ... --out DIR`` → :func:`placer.sim.sweep.run_sweep`
  (variants on Ray; sweep.csv and sweep.png)
* ``workload fit TRACE`` (the ``workload`` group, ``workload_app``) → :func:`placer.workload.fit.fit_classes`
  (the ``workload:`` section of a scenario, YAML)

Mounted lazily by :mod:`placer.cli.app`: this module is imported only when one of
these commands runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml
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
from placer.sim import SimConfig
from placer.sim.config import DISPATCH, WORKLOADS
from placer.sim.engine import simulate as run_simulation
from placer.sim.runtime import ExecutorRuntime
from placer.sim.sweep import VARY, parse_values, run_sweep, varied_label, write_outputs
from placer.specs import load_scenario
from placer.workload.fit import fit_classes, trace_arrival_rps
from placer.workload.trace import read_trace, with_hit_rates

workload_app = typer.Typer(help="Workload traces: fit request classes.", no_args_is_help=True)

WorkloadKind = choices("WorkloadKind", [w for w in WORKLOADS if w != "trace"])  # a trace comes with --trace
ArrivalKind = choices("ArrivalKind", ("poisson", "bursty"))
HandoffMode = choices("HandoffMode", HANDOFF_MODES)
Dispatch = choices("Dispatch", DISPATCH)
Vary = choices("Vary", VARY)


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
) -> None:
    """Replay a plan in the discrete-event simulator (TTFT/TPOT tails, goodput, BCR, link use).

    The instances' times are the ``--engine``'s (default: the scenario's ``engine``); a plan made
    under another engine replays, with a warning naming both."""
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


@workload_app.command("fit")
def workload_fit(
    trace: Annotated[Path, typer.Argument(help="JSONL trace (timestamp, input_length, output_length, "
                                          "hit_rate or hash_ids).", show_default=False)],
    out_path: Annotated[Path | None, typer.Option("--out", help="Also write the classes YAML here.")] = None,
    min_share: Annotated[float, typer.Option("--min-share", help="Buckets under this share of requests "
                                             "merge into a neighbour.")] = 0.02,
    cache_tokens: Annotated[int | None, typer.Option(
        "--prefix-cache-tokens", min=1, help="Hit rates as an LRU prefix cache of this many tokens realises them "
        "(the planned P capacity's cache); default: a cache that never evicts, the trace's ideal (an upper bound).",
        show_default=False)] = None,
) -> None:
    """Bucket a trace into request classes: the `workload:` section of a scenario."""
    try:
        classes = fit_classes(with_hit_rates(read_trace(trace), cache_tokens), min_share=min_share)
        try:
            rate = trace_arrival_rps(trace)
        except InputError:
            rate = None
    except PlacerError as e:
        _fail(e)
    body = {"workload": {**({"arrival_rps": round(rate, 6)} if rate else {}),
                         **({"prefix_cache_tokens": cache_tokens} if cache_tokens else {}),
                         "classes": [c.model_dump() for c in classes]}}
    text = f"# classes fitted from {trace.name}\n" + yaml.safe_dump(body, sort_keys=False)
    if out_path is not None:
        try:
            out_path.write_text(text)
        except OSError as e:
            _fail(InputError(f"--out: cannot write {str(out_path)!r}: {e.strerror}"))
    print(text, end="")


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
