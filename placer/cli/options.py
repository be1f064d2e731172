"""Options the planning commands share: ``--engine`` (the serving engine a plan's numbers assume).

in:  a command line's ``--engine`` value, a :class:`~placer.specs.Scenario`
out: :data:`EngineOpt` (a typer ``Annotated`` option, default None: the scenario's ``engine``) and
     :func:`with_engine`, the scenario with its ``engine`` replaced — validated by
     :func:`placer.estimate.check_engine` (the one rule, also estimate's), so a bad value is
     an InputError naming ``--engine`` and the value (exit code per CONTRACTS.md), never a traceback.

Each command adds one parameter and one line::

    engine: EngineOpt = None
    ...
    scenario = with_engine(load_scenario(path), engine)
"""

from __future__ import annotations

from typing import Annotated

import typer

from placer.estimate import check_engine
from placer.specs import ENGINE_HELP, Scenario

EngineOpt = Annotated[str | None, typer.Option(
    "--engine", help=ENGINE_HELP + " Default: the scenario's engine key (roofline when absent).", show_default=False)]


def with_engine(scenario: Scenario, engine: str | None) -> Scenario:
    """``scenario`` with ``engine`` replacing its ``engine`` key (None: the scenario as it is)."""
    if engine is None:
        return scenario
    return scenario.model_copy(update={"engine": check_engine(engine)})
