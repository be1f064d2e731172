"""Options the planning commands share: ``--engine`` (the serving engine a plan's numbers assume) and
``--runtime`` (the executor's measured per-request costs a plan's TTFT includes, and its decode step's Tokens messages).

in:  a command line's ``--engine`` / ``--runtime`` value, a :class:`~placer.specs.Scenario` or a
     :class:`~placer.problem.Problem`
out: :data:`EngineOpt` (a typer ``Annotated`` option, default None: the scenario's ``engine``) and
     :func:`with_engine`, the scenario with its ``engine`` replaced — validated by
     :func:`placer.estimate.check_engine` (the one rule, also estimate's), so a bad value is
     an InputError naming ``--engine`` and the value (exit code per CONTRACTS.md), never a traceback;
     :data:`RuntimeOpt` and :func:`with_runtime`, the problem with ``runtime`` read from the file
     (bench/measure_runtime.py's JSON, as ``placer simulate --runtime`` takes), an InputError naming the
     file and the field where it is bad.

Each command adds one parameter and one line::

    engine: EngineOpt = None
    ...
    scenario = with_engine(load_scenario(path), engine)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from placer.errors import InputError
from placer.specs import ENGINE_HELP, Scenario

EngineOpt = Annotated[str | None, typer.Option(
    "--engine", help=ENGINE_HELP + " Default: the scenario's engine key (roofline when absent).", show_default=False)]


def with_engine(scenario: Scenario, engine: str | None) -> Scenario:
    """``scenario`` with ``engine`` replacing its ``engine`` key (None: the scenario as it is)."""
    if engine is None:
        return scenario
    from placer.estimate import check_engine  # the instance estimator, only to check a value given

    return scenario.model_copy(update={"engine": check_engine(engine)})


RuntimeOpt = Annotated[Path | None, typer.Option(
    "--runtime", help="Include in the plan's TTFT the executor's measured per-request costs on the first token's "
    "path (path overhead, KV export/import, the line's socket path and in-order release: placer.executor_costs), "
    "and in each decode step (its TPOT) every sequence's Tokens message, from this runtime JSON "
    "(bench/measure_runtime.py's, as 'placer simulate --runtime' takes). Default: none, the planner's idealised "
    "deployment.", show_default=False)]


def with_runtime(problem, path: Path | None):
    """``problem`` with the runtime measured in ``path`` (None: the problem as it is); the plan's note then says
    where its TTFT's executor costs came from. A fleet takes none yet (InputError)."""
    if path is None:
        return problem
    if not dataclasses.is_dataclass(problem) or not hasattr(problem, "runtime"):
        raise InputError(f"--runtime {str(path)!r}: a fleet plan cannot take the executor's runtime yet; plan "
                         "without it")
    from placer.executor_runtime import ExecutorRuntime  # only when a runtime is given

    try:
        rt = ExecutorRuntime.from_json(path)
    except InputError as e:
        raise InputError(f"--runtime {str(path)!r}: {e}") from None
    source = f"{path}" + (f" ({rt.source})" if rt.source else "")
    return dataclasses.replace(problem, runtime=dataclasses.replace(rt, source=source))
