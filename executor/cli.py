"""CLI command of the executor: `placer deploy PLAN`.

`placer deploy PLAN.json [--dry-run] [--backend auto|triton|torch] [--device auto|cuda|cpu]
[--model-dir DIR] ...` builds the plan's `ServingConfig` once from the plan, its scenario
and the options, resolves where the engines run (`executor.devices`: Triton on CUDA in
bfloat16 when a GPU is visible, else torch on the CPU in float32), checks the served model
(a Hugging Face directory, an `Engine.save` file, or the tiny seeded model), prints the
placement with each instance's device and GPUs (`executor.deploy.describe`) and serves it
(`executor.deploy.serve`). `placer deploy --apply NEW_PLAN.json [--url URL]
[--grace-s S] [--apply-timeout-s S]` changes a running deployment live: the plan goes to
its server's `POST /plan`, which diffs it against the running instances and applies it
in the background (`executor.elastic`); this command follows `GET /plan/status`, prints
each instance starting, joining, draining and stopping, and exits 1 with the reason when
the change failed (the deployment then keeps its old plan).

A fleet plan (its rows name a `model`: `placer optimize` on a scenario with `models:`) deploys
each model's pools as that model's instances with its own router (`executor.fleet`,
`executor.fleet_deploy`); `--scenario` then takes the fleet's scenario, `--model-dir` /
`--model-file` take `NAME=PATH` once per model (a model given none serves the tiny seeded model,
seeded `--seed` + its index), and `--dry-run` prints each model's deployment grouped by model.
`--apply` of a new fleet plan of the same models changes each model's instances live; what a
fleet cannot change live (another set of models, …) the server refuses (501, named; exit 1).

`deploy` is a plain function with Typer-annotated parameters; the `placer` app reaches
it through the `placer.commands` entry point (`executor/commands.py`). This module imports neither torch nor ray nor the HTTP stack:
they come in through the `executor.deploy` functions it calls. Exit codes as the rest
of the CLI: 2 for a bad plan, scenario or option (the message names it), 1 for
anything else.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from pydantic import ValidationError

from executor.config import ServingConfig
from executor.deploy import serve
from executor.plan_client import follow_apply, post_plan
from executor.describe import describe
from executor.devices import Runtime, place_on_devices, resolve_runtime, visible_gpus
from executor.engine.config import EngineConfig
from executor.fleet import FleetMember, fleet_members
from executor.fleet_deploy import ModelSource, describe_fleet, serve_fleet
from executor.placement import InstanceSpec, placement, plan_models
from placer.errors import InputError, PlacerError
from placer.plan import Plan, load_plan
from placer.plancheck import check_plan_alone, check_plan_or_alone
from placer.settings import Settings
from placer.specs import Scenario, load_scenario


def deploy(
    plan_file: Annotated[Path | None, typer.Argument(metavar="PLAN.json", help="Plan to deploy.",
                                                     show_default=False)] = None,
    apply: Annotated[Path | None, typer.Option(
        "--apply", metavar="NEW_PLAN.json", help="Apply a new plan to the deployment serving at --url "
        "(live: new instances join when ready, leaving ones drain).")] = None,
    url: Annotated[str, typer.Option(help="Server of the running deployment (with --apply).")] =
        "http://127.0.0.1:8000",
    grace_s: Annotated[float, typer.Option(help="With --apply: how long leaving instances may finish "
                                                "what they hold before it is moved.")] = 30.0,
    apply_timeout_s: Annotated[float, typer.Option(
        "--apply-timeout-s", help="With --apply: the whole change's time limit (new instances that are not "
        "ready by then are stopped and the old plan kept).", min=1)] = 600.0,
    json_out: Annotated[bool, typer.Option("--json", help="With --apply: print the final status as JSON.")] = False,
    address: Annotated[str | None, typer.Option(
        "--address", help="Ray cluster: 'auto' or ADDR. Default: start a local Ray that emulates the "
        "plan's datacenters as custom resources on this machine.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the placement and exit.")] = False,
    port: Annotated[int, typer.Option(help="HTTP port of the completions endpoint.")] = 8000,
    host: Annotated[str, typer.Option(help="HTTP host to bind.")] = "127.0.0.1",
    scenario: Annotated[Path | None, typer.Option(
        help="The plan's scenario: link RTT/jitter, filter thresholds, class hit rates.")] = None,
    max_per_pool: Annotated[int | None, typer.Option(
        help="Start at most this many instances of each pool (a scaled-down emulation).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the served model's weights.")] = 0,
    model_file: Annotated[list[str] | None, typer.Option(
        metavar="[NAME=]FILE", help="Model weights saved by Engine.save (default: the tiny seeded model). A fleet plan: NAME=FILE, "
             "once per model.")] = None,
    model_dir: Annotated[list[str] | None, typer.Option(
        metavar="[NAME=]DIR", help="A local Hugging Face checkpoint (config.json, *.safetensors, tokenizer.json): Llama-3, "
             "Qwen2 or Qwen3 dense. Nothing is downloaded. A fleet plan: NAME=DIR, once per model.")] = None,
    backend: Annotated[str, typer.Option(
        help="Kernels: auto (Triton on CUDA, torch on CPU), triton (on CPU: Triton's interpreter) or torch.")]
        = "auto",
    device: Annotated[str, typer.Option(
        help="auto (CUDA when a GPU is visible), cuda or cpu. bfloat16 on CUDA, float32 on CPU.")] = "auto",
    num_blocks: Annotated[int, typer.Option(help="KV blocks per instance.")] = 1024,
    block_size: Annotated[int, typer.Option(help="Tokens per KV block.")] = 16,
    link_gbit_per_s: Annotated[float | None, typer.Option(help="Override every line's rate.")] = None,
    link_rtt_ms: Annotated[float | None, typer.Option(help="Override every line's RTT.")] = None,
    link_jitter_ms: Annotated[float | None, typer.Option(help="Override every line's jitter.")] = None,
    link_loss: Annotated[float, typer.Option(help="Packet loss probability on every line.")] = 0.0,
    request_log: Annotated[str | None, typer.Option(
        help="Request log sink: a .jsonl path, or 'db' / 'db:URL' for the service database.")] = None,
    token: Annotated[str | None, typer.Option(
        help="Bearer token of the control plane (POST /plan, /instances), sent with --apply. Default: "
        "PLACER_EXECUTOR_TOKEN (preferred: an option shows in the process list); neither: deploy generates "
        "one and prints it once.", show_default=False)] = None,
) -> None:
    """Deploy a plan on Ray and serve it (OpenAI-style /v1/completions)."""
    try:
        settings = Settings.from_env(executor_token=token)
    except ValidationError as exc:  # its messages name the field, never the value (a token)
        reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        _fail(str(InputError(f"settings (--token, PLACER_* environment): {reasons}")), 2)
    if apply is not None:
        _apply_remote(apply, url, grace_s, apply_timeout_s, json_out, settings.executor_token, scenario)
        return
    if plan_file is None:
        _fail("give PLAN.json to deploy, or --apply NEW_PLAN.json to change a running deployment", 2)
    links = {"link_gbit_per_s": link_gbit_per_s, "link_rtt_ms": link_rtt_ms, "link_jitter_ms": link_jitter_ms,
             "link_loss": link_loss}
    try:
        plan = load_plan(plan_file)
        check_plan_alone(plan)  # with --scenario, the serving config checks it against the scenario too
        scen = load_scenario(scenario) if scenario is not None else None
        gpus = visible_gpus() if address is None else None  # a cluster's GPUs are counted once connected
        runtime = resolve_runtime(backend, device, gpus)
        if plan_models(plan):
            members, sources, text = _fleet(plan, scen, runtime, gpus, max_per_pool, links, model_dir, model_file,
                                            seed)
            count = sum(len(m.specs) for m in members)
        else:
            config, specs, text, model_line = _single(plan, scen, runtime, gpus, max_per_pool, links, model_dir,
                                                      model_file)
            count, text = len(specs), f"{text}\n{model_line}"
    except PlacerError as exc:
        _fail(str(exc), exc.exit_code)
    except ValueError as exc:
        _fail(str(InputError(str(exc))), 2)
    if not count:
        _fail(f"plan {str(plan_file)!r} has no instances to start", 2)
    typer.echo(text)
    if dry_run:
        return
    control_token = settings.executor_token
    if control_token is None:  # as `placer serve`: a token nobody else knows, printed once, so --apply works
        control_token = secrets.token_urlsafe(24)
        typer.echo(f"control token: {control_token}  (generated for this run: no --token or PLACER_EXECUTOR_TOKEN; "
                   "give it to `placer deploy --apply` as PLACER_EXECUTOR_TOKEN)")
    if request_log is not None:  # where it goes, and what reads it (the README's replanning chain)
        typer.echo(f"request log: {request_log}; placer jobs add NAME --request-log {request_log} replans from it"
                   + ("" if request_log.startswith("db") else f", placer workload fit {request_log} fits it"))
    server = {"address": address, "max_per_pool": max_per_pool, "runtime": runtime, "request_log": request_log,
              "host": host, "port": port, "echo": typer.echo, "token": control_token,
              "protect_completions": settings.executor_protect_completions}
    try:
        # a backend still "auto" (a remote cluster's GPUs are not known here) is decided by the deployment
        engine_config = EngineConfig(backend="torch" if runtime.backend == "auto" else runtime.backend,
                                     block_size=block_size, num_blocks=num_blocks)
        if plan_models(plan):
            serve_fleet(plan, members, sources, engine_config, **server)
        else:
            model_dir_, model_file_ = _one(model_dir, "--model-dir"), _one(model_file, "--model-file")
            serve(plan, config, engine_config, seed=seed, model_file=model_file_, model_dir=model_dir_, **server)
    except (RuntimeError, ValueError) as exc:
        _fail(f"deploy failed: {exc}", 1)


def _single(plan: Plan, scen: Scenario | None, runtime: Runtime, gpus: int | None, max_per_pool: int | None,
            links: dict, model_dir: list[str] | None, model_file: list[str] | None
            ) -> tuple[ServingConfig, list[InstanceSpec], str, str]:
    """A single-model plan: its serving config, its instances on devices, the placement and model as text."""
    if scen is not None and scen.is_fleet:
        scen.single_model("placer deploy of a single-model plan")
    specs = placement(plan, max_per_pool)
    config = ServingConfig.from_plan(plan, scen, **links)
    specs = place_on_devices(specs, runtime, gpus)
    model_dir_, model_file_ = _one(model_dir, "--model-dir"), _one(model_file, "--model-file")
    model_line = _check_model(Path(model_dir_) if model_dir_ else None, Path(model_file_) if model_file_ else None)
    return config, specs, describe(plan, specs, config, runtime), model_line


def _fleet(plan: Plan, scen: Scenario | None, runtime: Runtime, gpus: int | None, max_per_pool: int | None,
           links: dict, model_dir: list[str] | None, model_file: list[str] | None, seed: int
           ) -> tuple[list[FleetMember], dict[str, ModelSource], str]:
    """A fleet plan: each model's member (instances placed on devices for the whole fleet: models apart),
    its weights, and the placement grouped by model as text."""
    members = fleet_members(plan, scen, max_per_pool=max_per_pool, **links)
    names = tuple(m.name for m in members)
    dirs, files = _per_model("--model-dir", model_dir, names), _per_model("--model-file", model_file, names)
    sources, served = {}, {}
    for i, name in enumerate(names):
        sources[name] = ModelSource(dirs.get(name), files.get(name), seed + i)
        served[name] = _check_model(Path(dirs[name]) if name in dirs else None,
                                    Path(files[name]) if name in files else None, f"model {name}: ",
                                    seed + i).removeprefix("model: ")
    placed = {s.name: s for s in place_on_devices([s for m in members for s in m.specs], runtime, gpus)}
    members = [dataclasses.replace(m, specs=[placed[s.name] for s in m.specs]) for m in members]
    return members, sources, describe_fleet(plan, members, runtime, served)


def _one(values: list[str] | None, option: str) -> str | None:
    """A single-model plan's one value of a repeatable option."""
    if values and len(values) > 1:
        raise ValueError(f"{option}: give it once for a single-model plan (got {len(values)})")
    return values[0] if values else None


def _per_model(option: str, values: list[str] | None, names: tuple[str, ...]) -> dict[str, str]:
    """`NAME=PATH` values of a fleet's repeatable option → {model: path}; ValueError naming a bad one."""
    out: dict[str, str] = {}
    for value in values or ():
        name, sep, path = value.partition("=")
        if not sep or not path:
            raise ValueError(f"{option} {value!r}: the plan is a fleet of {', '.join(names)}; give {option} "
                             "NAME=PATH once per model")
        if name not in names:
            raise ValueError(f"{option} {value!r}: unknown model {name!r}; the plan serves {', '.join(names)}")
        if name in out:
            raise ValueError(f"{option}: model {name!r} is given twice")
        out[name] = path
    return out


def _check_model(model_dir: Path | None, model_file: Path | None, whose: str = "", seed: int | None = None) -> str:
    """What will be served, checked before anything starts (ValueError naming the option, `whose` model
    in a fleet, and the problem)."""
    if model_dir is not None and model_file is not None:
        raise ValueError(f"{whose}give --model-dir or --model-file, not both")
    if model_dir is not None:
        from executor.engine.hf import describe_model_dir  # the tokenizers library comes in only here

        try:
            return f"model: {describe_model_dir(model_dir)}"
        except ValueError as exc:
            raise ValueError(f"{whose}{exc}") from None
    if model_file is not None:
        if not model_file.is_file():
            raise ValueError(f"{whose}--model-file {str(model_file)!r} does not exist")
        return f"model: {model_file} (Engine.save weights)"
    if seed is not None:
        return f"model: the tiny seeded model (seed {seed})"
    return "model: the tiny seeded model (--seed); --model-dir DIR serves a Hugging Face checkpoint"


#: How `--apply` gets the deployment's control token (named in every refusal of it).
TOKEN_HINT = ("set PLACER_EXECUTOR_TOKEN (or --token) to the control token the deployment was started with "
              "(placer deploy's --token or PLACER_EXECUTOR_TOKEN, or the one it printed at start)")


def _apply_remote(plan_path: Path, url: str, grace_s: float, timeout_s: float, json_out: bool,
                  token: str | None, scenario: Path | None = None) -> None:
    """Validate NEW_PLAN.json here (the one plan check, against `scenario` when given: exit 2/3 if
    bad), start the change on the running server, print each instance joining or draining as it
    happens; exit 1 with the reason when it failed.
    `token`: the control plane's bearer token (sent in a header, never printed)."""
    try:
        plan = load_plan(plan_path)
        check_plan_or_alone(load_scenario(scenario) if scenario is not None else None, plan)
        post_plan(plan, url, grace_s, timeout_s, token=token)
        typer.echo(f"applying {plan_path} to {url} (progress: {url.rstrip('/')}/plan/status)", err=json_out)
        status = follow_apply(url, timeout_s + 30, lambda ev: typer.echo(_event_line(ev), err=json_out),
                              token=token)
    except PlacerError as exc:
        # post_plan's refusal of the token (every deployment has one: given, or generated and printed)
        refused = any(f"refused the plan ({code})" in str(exc) for code in (401, 403))
        _fail(f"{exc}; {TOKEN_HINT}" if refused else str(exc), exc.exit_code)
    if json_out:
        typer.echo(json.dumps(status, indent=2))
    if status["state"] != "succeeded":
        _fail(f"the plan was not applied: {status['error']}", 1)
    report = status["report"]
    if not json_out:
        typer.echo(f"applied ({report['strategy']}) in {report['seconds']:.1f} s: {len(report['joined'])} joined, "
                   f"{len(report['drained'])} drained, {len(report['evacuated'])} evacuated, "
                   f"{len(report['keep'])} kept")


def _event_line(ev: dict) -> str:
    if ev["event"] == "strategy":
        return f"  {ev['strategy']}: {ev.get('detail', '')}"
    detail = f"  ({ev['detail']})" if ev.get("detail") else ""
    return f"  {ev['t_s']:7.1f} s  {ev['instance']:<36} {ev['event']}{detail}"


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)

