"""Issue 43, parts 2 and 6: one plan check (placer.plancheck) wherever a plan is read — `evaluate`,
`simulate`, `report`, `export`, `deploy` (`--dry-run` and `--apply`), the executor's `POST /plan`
and `placer plans import` — through the real commands: a plan that cannot serve exits 2 (or 3 for
the inventory) naming what is wrong, before anything is started, drained, stored or written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli.app import app
from tests.placer.conftest import micro_dict
from tests.placer.hardening.attacks import _plan, _pools

P_ROW, MD_ROW = ("P", "dc-a", "H100-SXM", 1, 2), ("MD", "dc-b", "L40S", 1, 2)

#: plans for the micro scenario that fail what the plan alone shows: (name, plan, words of the message)
ALONE = [
    ("empty", _plan(pools=[]), ("no P (or aggregated A) pool",)),
    ("prefill-less", _plan(pools=_pools(MD_ROW)), ("no P (or aggregated A) pool",)),
    ("all-counts-0", _plan(pools=_pools(("P", "dc-a", "H100-SXM", 1, 0), ("MD", "dc-b", "L40S", 1, 0))),
     ("no P (or aggregated A) pool", "counts are all 0")),
    ("duplicate-row", _plan(pools=_pools(P_ROW, P_ROW, MD_ROW)), ("pools[1] repeats pools[0]",)),
    ("negative-link", _plan(links=[{"src": "dc-a", "dst": "dc-b", "gbit_per_s_used": 1.0,
                                    "gbit_per_s_capacity": -100.0}]), ("links.0.gbit_per_s_capacity",)),
    ("negative-catch-up", _plan(handoff={"mode": "adaptive", "catch_up_threshold_tokens": -5}),
     ("handoff.catch_up_threshold_tokens",)),
]
#: JSON that reads as infinity (1e999) in a number the plan's types leave open
INFINITE = ("infinite-metric", json.dumps(_plan()).replace('"objective"', '"metrics": {"tpot_s": 1e999}, "objective"'),
            ("metrics.tpot_s", "finite"))


def _run(*args, env: dict | None = None):
    result = CliRunner(env=env).invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def _said(result, words) -> None:
    message = " ".join(result.output.split())  # Rich wraps long lines
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"


@pytest.fixture
def micro_file(tmp_path) -> Path:
    path = tmp_path / "micro.yaml"
    path.write_text(yaml.safe_dump(micro_dict()))
    return path


def _bad(tmp_path, case) -> Path:
    name, plan, _ = case
    path = tmp_path / f"{name}.json"
    path.write_text(plan if isinstance(plan, str) else json.dumps(plan))
    return path


def _commands(tmp_path, micro_file, plan):
    """Every command that reads a plan file, as the user types it (no running server needed:
    `--apply` must refuse before it connects; nothing listens on port 9)."""
    db = f"sqlite:///{tmp_path / 'plans.db'}"
    return {
        "evaluate": ["evaluate", micro_file, plan, "--time-limit", "10"],
        "simulate": ["simulate", micro_file, plan, "--requests", "50"],
        "report": ["report", plan, "--out", tmp_path / "report"],
        "export": ["export", plan, "--format", "sglang", "--model", "m", "--out", tmp_path / "export"],
        "export-scenario": ["export", plan, "--format", "k8s", "--model", "m", "--scenario", micro_file,
                            "--out", tmp_path / "export"],
        "deploy": ["deploy", plan, "--dry-run"],
        "deploy-scenario": ["deploy", plan, "--dry-run", "--scenario", micro_file],
        "apply": ["deploy", "--apply", plan, "--url", "http://127.0.0.1:9", "--apply-timeout-s", "1"],
        "plans-import": ["plans", "import", plan, "--database-url", db],
    }


@pytest.mark.parametrize("command", ["evaluate", "simulate", "report", "export", "export-scenario", "deploy",
                                     "deploy-scenario", "apply", "plans-import"])
@pytest.mark.parametrize("case", [*ALONE, INFINITE], ids=lambda c: c[0])
def test_every_command_refuses_a_plan_that_cannot_serve(tmp_path, micro_file, command, case):
    result = _run(*_commands(tmp_path, micro_file, _bad(tmp_path, case))[command],
                  env={"PLACER_EXECUTOR_TOKEN": "t" * 32})
    assert result.exit_code == 2, result.output
    _said(result, case[2])
    assert not (tmp_path / "export").exists() and not (tmp_path / "report").exists()


def test_a_plan_that_fits_passes_the_same_commands(tmp_path, micro_file):
    """The check refuses only what is wrong: the micro plan goes through export and the dry run."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_plan(routes=[{"request_class": "hot", "pipeline": "P-MD", "src": "dc-a",
                                              "dst": "dc-b", "rps": 1.0}])))
    commands = _commands(tmp_path, micro_file, good)
    for name in ("export", "export-scenario", "deploy", "deploy-scenario"):
        result = _run(*commands[name])
        assert result.exit_code == 0, (name, result.output)


X100 = ("x100-inventory", _plan(pools=_pools(("P", "dc-a", "H100-SXM", 4, 100), MD_ROW)),
        ("inventory[dc-a,H100-SXM]", "need 400"))
UNKNOWN_CHIP = ("unknown-chip", _plan(pools=_pools(("P", "dc-a", "H999", 1, 1), MD_ROW)), ("pools[0].chip", "H999"))


@pytest.mark.parametrize("command", ["export-scenario", "simulate", "deploy-scenario"])
@pytest.mark.parametrize("case", [X100, UNKNOWN_CHIP], ids=lambda c: c[0])
def test_with_a_scenario_the_plan_must_fit_it(tmp_path, micro_file, command, case):
    result = _run(*_commands(tmp_path, micro_file, _bad(tmp_path, case))[command])
    assert result.exit_code == (3 if case is X100 else 2), result.output
    _said(result, case[2])


def test_plans_import_stores_nothing_that_cannot_serve(tmp_path, micro_file):
    import db
    from db.models import Plan as PlanRow

    url = f"sqlite:///{tmp_path / 'plans.db'}"
    for case in (*ALONE, X100):
        extra = ["--scenario", micro_file] if case is X100 else []
        result = _run("plans", "import", _bad(tmp_path, case), "--database-url", url, *extra)
        assert result.exit_code == (3 if case is X100 else 2), (case[0], result.output)
        _said(result, case[2])
    engine, factory = db.connect(url)
    with factory() as session:
        assert session.query(PlanRow).count() == 0
    engine.dispose()
