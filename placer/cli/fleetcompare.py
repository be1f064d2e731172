"""``placer compare`` of a fleet scenario: each model's share of the joint plan beside its baselines.

in:  a loaded fleet :class:`~placer.specs.Scenario`, a :class:`~placer.ilp.config.SolveConfig`,
     ``--json``, the measured profiles
out: per model, the single-model comparison's tables (:func:`placer.cli.render.compare_view`),
     or with ``--json`` ``{"fleet": plan, "models": {name: {"pdd", "baselines", "scaled"}}}``;
     a typed error as its exit code (:func:`placer.cli.output.fail`)
"""

from __future__ import annotations

import json

from rich.console import Group
from rich.text import Text

from placer.cli.output import fail, out
from placer.cli.render import compare_view
from placer.errors import PlacerError
from placer.fleetcompare import compare_fleet
from placer.ilp.config import SolveConfig
from placer.plan import Plan
from placer.specs import Scenario

FOOTING = ("each model's PDD row is its share of the joint fleet plan; its baselines are solved on the hardware "
           "that plan leaves it (the other models' chips, power and line Gbit/s taken out); no break-even for fleets")


def _dump(plan) -> dict:
    return json.loads(plan.to_json()) if isinstance(plan, Plan) else plan


def run(scenario: Scenario, config: SolveConfig, json_out: bool, measured: dict | None) -> None:
    """Compare a fleet per model and print it (see the module docstring)."""
    try:
        result = compare_fleet(scenario, config, measured)
    except PlacerError as e:
        fail(e)
    if json_out:
        body = {"fleet": _dump(result["fleet"]), "models": {
            name: {"pdd": _dump(r["pdd"]), "baselines": {k: _dump(v) for k, v in r["baselines"].items()},
                   "scaled": {k: _dump(v) for k, v in r.get("scaled", {}).items()}}
            for name, r in result["models"].items()}}
        print(json.dumps(body, indent=2))
        return
    parts: list = [Text(f"fleet {result['fleet'].scenario}: {FOOTING}", style="dim")]
    for name, r in result["models"].items():
        parts += [Text(f"model {name}", style="bold"), compare_view(r)]
    out.print(Group(*parts))
