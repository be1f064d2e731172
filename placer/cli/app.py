"""The ``placer`` command: the root app, the command registry and ``main``.

in:  ``argv``; out: one command's run, with the exit codes of docs/contracts.md
(0 success, 2 bad input, 3 infeasible, 4 no feasible plan within the time limit,
1 anything else) and no traceback for a user's mistake.

The registry maps a command name to a :class:`Spec`: ``("module:attr", help line)``.
``attr`` is either a ``typer.Typer`` (mounted as a command group of that name:
``workload``, ``jobs``, ``profile``) or a plain function whose parameters carry
Typer annotations (mounted as one command: ``optimize``, ``serve``, ``deploy``).
:class:`LazyGroup`, the root's click group, imports a command's module only when
that command runs, and ``placer --help`` lists every command from the help lines
alone. Command modules therefore import at the top, as any module does, and
``placer optimize`` loads the planner and nothing else (no FastAPI, SQLAlchemy,
torch or Ray).

Placer's own commands are in :data:`COMMANDS`. Other packages add theirs through
the ``placer.commands`` entry-point group, so placer never imports them by name.
An entry point can only name an object, and loading it imports that object's
module; so it names a *spec*, a ``(target, help line)`` tuple in a module that
imports nothing (``executor/commands.py``: ``DEPLOY = ("executor.cli:deploy",
"Deploy a plan …")``, registered as ``deploy = "executor.commands:DEPLOY"``). The
listing then costs one tiny import per package, and the command's own module is
imported only when it runs. Entry points are read only when a name is not placer's
own: a plug-in command, the listing, or an unknown name.
"""

from __future__ import annotations

import difflib
import sys
from functools import cache
from importlib import import_module
from typing import Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

from placer.cli.output import err


class Spec(NamedTuple):
    """Where a command lives and the line ``placer --help`` shows for it."""

    target: str  # "module:attr": a typer.Typer (a group) or a Typer-annotated function (a command)
    help: str | None  # None only for an entry point of the older form (its module gives the help)


#: placer's own commands, in the order ``placer --help`` lists them; each help line
#: is the first line of the command's docstring (tests/placer/cli/test_cli.py checks it).
COMMANDS: dict[str, Spec] = {
    "optimize": Spec("placer.cli.plan:optimize", "Solve for the plan that maximises BCR (or the chosen objective)."),
    "evaluate": Spec("placer.cli.plan:evaluate", "Metrics of a given plan without re-optimising its pools."),
    "compare": Spec("placer.cli.plan:compare",
                    "The PDD plan beside the baselines same-dc-pd, cross-dc-pd, hetero-same-dc-pd (Splitwise), "
                    "prfaas and agg."),
    "simulate": Spec("placer.cli.sim:simulate",
                     "Replay a plan in the discrete-event simulator (TTFT/TPOT tails, goodput, BCR, link use)."),
    "sweep": Spec("placer.cli.sim:sweep",
                  "Optimise and simulate many variants in parallel on Ray; write a CSV and a PNG plot."),
    "frontier": Spec("placer.cli.frontier:frontier",
                     "Solve the BCR optimum at each TTFT or TPOT SLA beside the baselines; table, CSV and PNG."),
    "serve": Spec("placer.service.cli:serve",
                  "Run the REST API (FastAPI + uvicorn); migrations create the schema on first start."),
    "estimate": Spec("placer.cli.estimate:estimate",
                     "Predict one instance's prefill, decode and memory figures (no ILP)."),
    "report": Spec("placer.cli.report:report",
                   "Draw a plan: a self-contained HTML report with its diagram, metrics and charts."),
    "export": Spec("placer.cli.export:export",
                   "Write what an operator runs for a plan on SGLang, vLLM, Dynamo or Kubernetes."),
    "workload": Spec("placer.cli.workload:workload_app", "Workload traces: fit request classes."),
    "jobs": Spec("placer.service.jobs_cli:jobs",
                 "Scheduled replanning jobs: re-fit the workload, re-solve, propose or apply a change."),
    "plans": Spec("placer.service.cli:plans",
                  "Stored plans: bring a plan made by placer optimize into the service and its dashboard."),
    "bench": Spec("placer.cli.bench:bench",
                  "Load an OpenAI-compatible endpoint with a scenario's workload; measured beside the plan's promise."),
    "catalog": Spec("placer.cli.catalog:catalog_app",
                    "The chips and models the planner knows, with the figures it uses and their sources."),
}
ENTRY_POINTS = "placer.commands"


@cache
def plugins() -> dict[str, Spec]:
    """Commands of other packages (the ``placer.commands`` entry points), by name."""
    from importlib.metadata import entry_points  # ~10 ms: only when a plug-in or the listing is asked for

    out = {}
    for ep in sorted(entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        if ep.name in COMMANDS:
            continue  # placer's own command keeps its name
        target, help_line = ep.load()
        out[ep.name] = Spec(target, help_line)
    return out


def spec(name: str) -> Spec | None:
    """The spec of command ``name``, or None when there is no such command."""
    return COMMANDS.get(name) or plugins().get(name)


def load(name: str, target: str) -> Any:
    """Import ``target`` ("module:attr") and make it the click command ``name``."""
    module_name, _, attr = target.partition(":")
    module = import_module(module_name)
    obj = getattr(module, attr, None)
    if isinstance(obj, typer.Typer):
        command = typer.main.get_group(obj)
    elif callable(obj):
        single = typer.Typer(add_completion=False)
        single.command(name)(obj)
        command = typer.main.get_command(single)
    else:
        command = None
    if command is None:
        raise LookupError(f"placer command {name!r}: {target} is neither a typer.Typer nor a function")
    command.name = name
    flags_as_flags(command)
    return command


def flags_as_flags(command: Any) -> None:
    """Show boolean options as the flags they are (``--json``, ``--marginals / --no-marginals``),
    without the ``<bool>`` value Typer's help displays but the option does not take; in
    ``command`` and, for a group, every subcommand."""
    for param in getattr(command, "params", []):
        _flag(param)
    help_option = command.get_help_option
    command.get_help_option = lambda ctx: _flag(help_option(ctx))  # --help is made per context
    for sub in getattr(command, "commands", {}).values():
        flags_as_flags(sub)


def _flag(param: Any) -> Any:
    if param is not None and getattr(param, "is_flag", False) and param.metavar is None:
        param.metavar = ""
    return param


class LazyGroup(TyperGroup):
    """The root group: commands come from the registry and are imported when they run."""

    listing = False  # while the help page is drawn: answer with the registry's help lines

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *plugins()]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        found = spec(cmd_name)
        if found is None:
            return None
        if self.listing and found.help is not None:
            return TyperCommand(name=cmd_name, help=found.help)
        self.commands[cmd_name] = load(cmd_name, found.target)
        return self.commands[cmd_name]

    def get_help_option(self, ctx: Any) -> Any:
        return _flag(super().get_help_option(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        for param in self.params:  # the root's own flags (--version) as flags, as every command's
            _flag(param)
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """As click's, with "Did you mean …?" drawn from every registered name, not the loaded ones."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and not ctx.resilient_parsing and self.get_command(ctx, name) is None:
            matches = difflib.get_close_matches(name, self.list_commands(ctx))
            hint = f". Did you mean {', '.join(repr(m) for m in matches)}?" if matches else "."
            ctx.fail(f"No such command {name!r}{hint}")
        return super().resolve_command(ctx, args)


app = typer.Typer(
    cls=LazyGroup,
    name="placer",
    help="Hardware-aware placement optimizer for PDD (Prefill / RelayDecode / MainDecode) LLM inference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # only when asked

        typer.echo(f"placer {version('placer')}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print placer's version and exit.")) -> None:
    pass


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
