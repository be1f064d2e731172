"""CLI command of the executor: `placer deploy PLAN`, registered onto the `placer` app.

`placer deploy --apply NEW_PLAN.json [--url URL] [--grace-s S]` changes a running
deployment live: the plan goes to its server's `POST /plan`, which diffs it against
the running instances and applies it (`executor.elastic`); the report is printed.

`register(app)` adds the command; ray, torch, fastapi and uvicorn are imported inside
it, so `placer optimize` starts as fast as before. Exit codes as the rest of the CLI:
2 for a bad plan, scenario or option (the message names it), 1 for anything else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add `deploy` to the `placer` Typer app."""

    @app.command()
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
        model_file: Annotated[Path | None, typer.Option(
            help="Model weights saved by Engine.save (default: the tiny seeded model).")] = None,
        num_blocks: Annotated[int, typer.Option(help="KV blocks per instance.")] = 1024,
        block_size: Annotated[int, typer.Option(help="Tokens per KV block.")] = 16,
        link_gbit_per_s: Annotated[float | None, typer.Option(help="Override every line's rate.")] = None,
        link_rtt_ms: Annotated[float | None, typer.Option(help="Override every line's RTT.")] = None,
        link_jitter_ms: Annotated[float | None, typer.Option(help="Override every line's jitter.")] = None,
        link_loss: Annotated[float, typer.Option(help="Packet loss probability on every line.")] = 0.0,
        request_log: Annotated[str | None, typer.Option(
            help="Request log sink: a .jsonl path, or 'db' / 'db:URL' for the service database.")] = None,
    ) -> None:
        """Deploy a plan on Ray and serve it (OpenAI-style /v1/completions)."""
        from executor.deploy import describe
        from executor.handoff import HandoffPolicy
        from executor.placement import link_shapes, placement
        from executor.routing import RoutingPolicy
        from placer.errors import InputError, PlacerError
        from placer.plan import load_plan
        from placer.specs import load_scenario

        def fail(message: str, code: int) -> None:
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(code)

        if apply is not None:
            _apply_remote(apply, url, grace_s, fail)
            return
        if plan_file is None:
            fail("give PLAN.json to deploy, or --apply NEW_PLAN.json to change a running deployment", 2)

        try:
            plan = load_plan(plan_file)
            scen = load_scenario(scenario) if scenario is not None else None
            specs = placement(plan, max_per_pool)
            links = link_shapes(plan, scen, gbit_per_s=link_gbit_per_s, rtt_ms=link_rtt_ms,
                                jitter_ms=link_jitter_ms, loss=link_loss)
            policy = RoutingPolicy.from_plan(plan, scen)
            handoff = HandoffPolicy.from_plan(plan)
        except PlacerError as exc:
            fail(str(exc), exc.exit_code)
        except ValueError as exc:
            fail(str(InputError(str(exc))), 2)
        if not specs:
            fail(f"plan {str(plan_file)!r} has no instances to start", 2)
        typer.echo(describe(plan, specs, links, policy, handoff))
        if dry_run:
            return

        import ray
        import uvicorn

        from executor.deploy import RayDeployment, start_local_ray
        from executor.engine import EngineConfig, ModelConfig
        from executor.request_log import BatchingRequestLog, open_sink
        from executor.server import create_app

        if address is None:
            start_local_ray(specs)
        else:
            ray.init(address=address, log_to_driver=False)
        dep = None
        try:
            sink = BatchingRequestLog(open_sink(request_log)) if request_log else None
            dep = RayDeployment(plan, ModelConfig(), EngineConfig(backend="torch", block_size=block_size,
                                                                 num_blocks=num_blocks),
                                scenario=scen, seed=seed, max_per_pool=max_per_pool, links=links, policy=policy,
                                handoff=handoff, request_log=sink,
                                model_file=str(model_file) if model_file else None)
            typer.echo(f"serving on http://{host}:{port}/v1/completions (Ctrl-C stops)")
            uvicorn.run(create_app(dep.router, deployment=dep), host=host, port=port, log_level="warning")
        except (RuntimeError, ValueError) as exc:
            fail(f"deploy failed: {exc}", 1)
        finally:
            if dep is not None:
                dep.close()
            ray.shutdown()


def _apply_remote(plan_path: Path, url: str, grace_s: float, fail) -> None:
    """Validate NEW_PLAN.json here (exit 2 if bad), POST it to the running server, print the report."""
    import json

    import httpx

    from placer.errors import PlacerError
    from placer.plan import load_plan

    try:
        plan = load_plan(plan_path)
    except PlacerError as exc:
        fail(str(exc), exc.exit_code)
    try:
        r = httpx.post(f"{url.rstrip('/')}/plan", json=plan.model_dump(mode="json"), params={"grace_s": grace_s},
                       timeout=grace_s + 300)
    except httpx.HTTPError as exc:
        fail(f"cannot reach the deployment at {url}: {exc}", 1)
    if r.status_code != 200:
        fail(f"the deployment refused the plan ({r.status_code}): {r.text}", 2 if r.status_code == 422 else 1)
    report = r.json()
    typer.echo(json.dumps(report, indent=2))
