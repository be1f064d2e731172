"""The `placer` command as a user runs it: a real subprocess, exit codes, JSON contract."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.cli.app import COMMANDS, load
from placer.errors import SolveTimeoutError
from tests.placer.conftest import EXAMPLES, micro_dict

PLACER = [sys.executable, "-m", "placer.cli"]
METRIC_KEYS = {"bcr_requests_per_usd", "cost_usd_per_h", "goodput_rps", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
               "tpot_s", "wan_gbit_per_s", "rld_token_share"}


def run(*args, timeout=120):
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run([*PLACER, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)


def write(tmp_path: Path, data: dict, name="s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_optimize_json_follows_the_contract(tmp_path):
    out = tmp_path / "plan.json"
    r = run("optimize", EXAMPLES / "pdd-two-dc.yaml", "--json", "--out", out)
    assert r.returncode == 0, r.stderr
    # --json --out: the plan goes to the file, stdout is not flooded with it again, one line says where
    assert r.stdout == "" and f"wrote the plan JSON to {out}" in r.stderr
    plan = json.loads(out.read_text())
    assert json.loads(run("optimize", EXAMPLES / "pdd-two-dc.yaml", "--json", "--no-verify").stdout)["pools"]
    assert plan["schema_version"] == 1 and plan["scenario"] == "pdd-two-dc" and plan["objective"] == "bcr"
    assert METRIC_KEYS <= set(plan["metrics"])
    m = plan["metrics"]
    assert m["bcr_requests_per_usd"] == pytest.approx(m["goodput_rps"] * 3600 / m["cost_usd_per_h"])
    assert {"role", "datacenter", "chip", "tp", "count"} <= set(plan["pools"][0])
    assert {"request_class", "pipeline", "src", "dst", "rps"} <= set(plan["routes"][0])
    assert {r["pipeline"] for r in plan["routes"]} <= {"P-MD", "P-RLD-MD", "P-RLD"}
    assert plan["links"][0]["gbit_per_s_capacity"] == 25.0
    assert plan["handoff"]["catch_up_threshold_tokens"] == 64
    assert plan["solver"]["status"] in ("optimal", "feasible") and plan["solver"]["mip_gap"] <= 0.01
    assert isinstance(plan["binding"], list)


def test_optimize_prints_a_readable_plan():
    r = run("optimize", EXAMPLES / "pdd-two-dc.yaml", "--no-marginals")
    assert r.returncode == 0, r.stderr
    for words in ("BCR", "pools", "routes", "Ascend-910B", "TTFT P50 / P90 / P99"):
        assert words in r.stdout


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        ({"workload": {"arrival_rps": -2, "classes": micro_dict()["workload"]["classes"]}}, 2, "arrival_rps"),
        ({"model": "gpt-7"}, 2, "unknown model 'gpt-7'"),
        ({"sla": {"ttft_p90_s": 2.0, "tpot_s": 0.0001}}, 3, "TPOT SLA"),
    ],
)
def test_bad_input_and_infeasible_exit_codes_without_traceback(tmp_path, change, code, words):
    r = run("optimize", write(tmp_path, micro_dict(**change)))
    assert r.returncode == code
    assert words in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_missing_file_is_bad_input(tmp_path):
    r = run("optimize", tmp_path / "missing.yaml")
    assert r.returncode == 2 and "cannot read scenario file" in r.stderr and "Traceback" not in r.stderr


def test_no_plan_within_the_time_limit_exits_4(monkeypatch, tmp_path):
    def slow(*args, **kwargs):
        raise SolveTimeoutError(0.5)

    monkeypatch.setattr("placer.cli.plan.solve", slow)
    result = CliRunner().invoke(app, ["optimize", str(write(tmp_path, micro_dict())), "--time-limit", "0.5"])
    assert result.exit_code == 4
    assert "within the time limit of 0.5 s" in result.output


def test_a_plan_cut_short_by_the_time_limit_says_so_and_its_gap_first(monkeypatch, tmp_path):
    from placer.optimize import optimize

    def short(problem, config):
        plan = optimize(problem, config)
        return plan.model_copy(update={"solver": plan.solver.model_copy(update={"status": "feasible", "mip_gap": 0.069})})

    monkeypatch.setattr("placer.cli.plan.solve", short)
    result = CliRunner().invoke(app, ["optimize", str(write(tmp_path, micro_dict())), "--no-verify", "--json"])
    assert result.exit_code == 0
    # past 2 s (a loaded host) a non-terminal stderr first gets one "solving…" line (output.working)
    said = [line for line in result.stderr.splitlines() if line != "solving…"]
    assert said[0].startswith("best plan found within the time limit: at most 6.90 % below the optimum")
    assert json.loads(result.stdout)["solver"]["status"] == "feasible"


def test_evaluate_a_hand_written_plan_routes_it(tmp_path):
    scenario = write(tmp_path, micro_dict())
    hand = {"schema_version": 1, "scenario": "micro", "pools": [
        {"role": "P", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 2},
        {"role": "MD", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 2, "count": 1},
        {"role": "MD", "datacenter": "dc-b", "chip": "L40S", "tp": 2, "count": 2}]}
    plan_file = tmp_path / "hand.json"
    plan_file.write_text(json.dumps(hand))
    r = run("evaluate", scenario, plan_file, "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert sorted((p["role"], p["count"]) for p in plan["pools"]) == sorted((p["role"], p["count"]) for p in hand["pools"])
    assert plan["metrics"]["goodput_rps"] > 0 and plan["routes"]


def test_evaluate_reproduces_an_optimized_plan(tmp_path):
    scenario = write(tmp_path, micro_dict())
    opt = run("optimize", scenario, "--json", "--no-marginals")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(opt.stdout)
    r = run("evaluate", scenario, plan_file, "--json")
    assert r.returncode == 0, r.stderr
    a, b = json.loads(opt.stdout)["metrics"], json.loads(r.stdout)["metrics"]
    assert b["cost_usd_per_h"] == pytest.approx(a["cost_usd_per_h"])
    assert b["served_rps"] == pytest.approx(a["served_rps"], rel=1e-4)


def test_evaluate_an_overloaded_plan_is_infeasible(tmp_path):
    scenario = write(tmp_path, micro_dict())
    plan = {"schema_version": 1, "scenario": "micro",
            "pools": [{"role": "P", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1},
                      {"role": "MD", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1}],
            "routes": [{"request_class": "hot", "pipeline": "P-MD", "src": "dc-a", "dst": "dc-a", "rps": 500.0}]}
    f = tmp_path / "p.json"
    f.write_text(json.dumps(plan))
    r = run("evaluate", scenario, f)
    assert r.returncode == 3 and "cannot carry" in r.stderr


def test_evaluate_rejects_a_malformed_plan(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"schema_version": 1, "scenario": "x", "pools": [{"role": "Q"}]}))
    r = run("evaluate", write(tmp_path, micro_dict()), f)
    assert r.returncode == 2 and "pools.0.role" in r.stderr


def test_compare_json_has_pdd_and_every_baseline(tmp_path):
    r = run("compare", write(tmp_path, micro_dict()), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["baselines"]) == {"same-dc-pd", "cross-dc-pd", "hetero-same-dc-pd", "prfaas", "agg"}
    assert {p["role"] for p in out["baselines"]["agg"]["pools"]} == {"A"}
    prfaas = out["baselines"]["prfaas"]  # decode local, prefill local or remote: P and MD over P-MD
    assert "error" in prfaas or ({p["role"] for p in prfaas["pools"]} <= {"P", "MD"}
                                 and len({p["datacenter"] for p in prfaas["pools"] if p["role"] == "MD"}) <= 1)
    for name, plan in out["baselines"].items():
        if "error" not in plan and name not in ("agg", "prfaas"):
            assert {p["role"] for p in plan["pools"]} <= {"P", "D"}, name
            assert {r["pipeline"] for r in plan["routes"]} <= {"P-D"}, name
    same = out["baselines"]["same-dc-pd"]
    assert len({p["chip"] for p in same["pools"]}) == 1 and len({p["datacenter"] for p in same["pools"]}) == 1
    # PDD's search space contains same-DC PD, so it is never worse at the same load.
    if same["metrics"]["served_rps"] >= out["pdd"]["metrics"]["served_rps"] - 1e-6:
        assert out["pdd"]["metrics"]["bcr_requests_per_usd"] >= same["metrics"]["bcr_requests_per_usd"] * 0.99


def test_optimize_with_measured_profiles_records_them(tmp_path):
    from tests.profiler.conftest import synthetic_profile, write_profile

    write_profile(tmp_path / "l40s.json", synthetic_profile("L40S", 0.6, 0.6))
    scenario = write(tmp_path, micro_dict(datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 4}},
                                                       {"name": "dc-b", "inventory": {"L40S": 16}}]))
    r = run("optimize", scenario, "--json", "--no-marginals", "--profiles", tmp_path / "l40s.json")
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout)["notes"]
    assert any("calibrated with L40S" in n and "l40s.json" in n for n in notes)
    bad = run("optimize", scenario, "--profiles", tmp_path / "nope.json")
    assert bad.returncode == 2 and "--profiles" in bad.stderr


HEAVY = ("torch", "triton", "ray", "fastapi", "sqlalchemy", "uvicorn")


def _loaded_after(*argv: str) -> dict:
    """Run `placer ARGV` in a fresh interpreter; which heavy and command modules it imported."""
    code = ("import json, runpy, sys\n"
            f"sys.argv = ['placer', *{list(argv)!r}]\n"
            "try:\n    runpy.run_module('placer.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
            "or m.startswith(('placer.cli.', 'placer.service', 'profiler', 'executor')))), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "120"})
    return {"stdout": r.stdout, "modules": json.loads(r.stderr.strip().splitlines()[-1])}


PLUGIN = {
    "fakeplug/__init__.py": "",
    "fakeplug/commands.py": 'HELLO = ("fakeplug.cli:hello", "Say hello.")\nGREET = ("fakeplug.cli:greet", "Greetings.")\n',
    "fakeplug/cli.py": ("import typer\n\n\ndef hello(name: str = 'world') -> None:\n    \"\"\"Say hello.\"\"\"\n"
                        "    print(f'hello {name}')\n\n\ngreet = typer.Typer(help='Greetings.')\n\n\n"
                        "@greet.command('warmly')\ndef warmly() -> None:\n    print('warm greetings')\n"),
    "fakeplug-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: fakeplug\nVersion: 0.1\n",
    "fakeplug-0.1.dist-info/entry_points.txt": ("[placer.commands]\nhello = fakeplug.commands:HELLO\n"
                                                "greet = fakeplug.commands:GREET\n"),
}


def test_a_package_adds_commands_through_an_entry_point_spec(tmp_path):
    """A spec gives the help line; the command's module is imported only when it runs."""
    for name, text in PLUGIN.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    code = ("import runpy, sys\nsys.argv = ['placer', *sys.argv[1:]]\ntry:\n"
            "    runpy.run_module('placer.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('fakeplug.cli' in sys.modules, file=sys.stderr)")

    def placer(*args):
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                              timeout=60)

    listing = placer("--help")
    assert "Say hello." in listing.stdout and "Greetings." in listing.stdout
    assert listing.stderr.strip().endswith("False")  # listed without importing fakeplug.cli
    hello = placer("hello", "--name", "placer")
    assert hello.stdout == "hello placer\n" and hello.stderr.strip().endswith("True")
    assert placer("greet", "warmly").stdout == "warm greetings\n"


def test_the_planner_import_path_does_not_load_torch_triton_or_ray():
    code = ("import sys, placer.cli, placer.optimize, placer.baselines; "
            "print(sorted(m for m in ('torch', 'triton', 'ray') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_optimize_imports_neither_the_baselines_nor_mathopts_python_layer_nor_pywraplp(tmp_path):
    """Issue 47: `placer optimize` pays only its own imports — the baselines and the break-even are `compare`'s, and
    the MILPs and LPs go to MathOpt's solver core as protos (its Python layer, ~0.1 s to import, and pywraplp,
    40-110 ms, are never needed); with --no-verify no simulator, and no --robust or --engine machinery."""
    scenario = write(tmp_path, micro_dict())
    code = ("import json, runpy, sys\n"
            f"sys.argv = ['placer', 'optimize', {str(scenario)!r}, '--json', '--no-marginals', '--no-verify']\n"
            "try:\n    runpy.run_module('placer.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('placer.baselines', 'placer.breakeven', "
            "'ortools.math_opt.python', 'ortools.linear_solver', 'placer.sim', 'placer.robust', 'placer.estimate', "
            "'placer.optimize_fleet')))), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert json.loads(r.stdout)["solver"]["status"] == "optimal", r.stderr[-500:]
    assert json.loads(r.stderr.strip().splitlines()[-1]) == []


def test_optimize_help_states_the_requests_the_verification_simulates():
    """The default the help prints (read without the simulator) is the one placer.sim.verify runs."""
    from placer.sim import verify
    from placer.verify_defaults import CHECK_REQUESTS

    assert verify.CHECK_REQUESTS == CHECK_REQUESTS


def test_optimize_loads_neither_the_service_nor_the_engine(tmp_path):
    loaded = _loaded_after("optimize", str(write(tmp_path, micro_dict())), "--json", "--no-marginals")
    assert json.loads(loaded["stdout"])["scenario"] == "micro"
    assert not [m for m in loaded["modules"] if m.split(".")[0] in HEAVY], loaded["modules"]
    assert not [m for m in loaded["modules"] if m.startswith(("placer.service", "placer.cli.sim", "placer.cli.report"))]


def test_help_lists_every_command_without_importing_one():
    loaded = _loaded_after("--help")
    for name in (*COMMANDS, "profile", "deploy"):
        assert f" {name} " in loaded["stdout"], name
    assert not [m for m in loaded["modules"] if m.split(".")[0] in HEAVY], loaded["modules"]
    command_modules = {spec.target.partition(":")[0] for spec in COMMANDS.values()}
    assert not command_modules & set(loaded["modules"]), loaded["modules"]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_registry_help_line_is_the_command_own(name):
    """`placer --help` shows the registry's line; `placer NAME --help` the command's docstring."""
    command = load(name, COMMANDS[name].target)
    assert (command.help or "").strip().splitlines()[0] == COMMANDS[name].help


def test_a_misspelt_command_gets_a_suggestion():
    result = CliRunner().invoke(app, ["optimise"])
    assert result.exit_code == 2
    assert "Did you mean 'optimize'?" in result.output


def _markup_scenario(tmp_path: Path) -> Path:
    """The micro scenario with a scenario, a datacenter and classes named as Rich markup."""
    data = micro_dict(name="[/]")
    data["datacenters"][0]["name"] = "[/]"
    data["links"][0]["src"] = "[/]"
    data["workload"]["classes"][0]["name"] = "[bold]x[/]"
    data["workload"]["classes"][1]["name"] = "[/]"
    return write(tmp_path, data)


def test_names_that_look_like_markup_print_as_themselves(tmp_path):
    scenario, plan = _markup_scenario(tmp_path), tmp_path / "plan.json"
    commands = [("optimize", scenario, "--out", plan, "--no-marginals"), ("evaluate", scenario, plan),
                ("compare", scenario, "--no-break-even"), ("simulate", scenario, plan, "--requests", "300")]
    for argv in commands:
        r = run(*argv, timeout=300)
        assert r.returncode == 0, (argv[0], r.stderr[-800:])
        assert "MarkupError" not in r.stderr and "[/]" in r.stdout, argv[0]
    assert "[bold]x[/]" in run("optimize", scenario, "--no-marginals").stdout  # not rendered as bold "x"


def test_boolean_options_show_as_flags_not_values():
    for argv in (["optimize"], ["compare"], ["simulate"], ["workload", "fit"], ["report"]):
        r = run(*argv, "--help")
        assert r.returncode == 0, r.stderr
        assert "<bool>" not in r.stdout, argv
        assert "--json" in r.stdout or "--help" in r.stdout
    assert "--no-marginals" in run("optimize", "--help").stdout


def _narrow(*args, timeout=300):
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run([*PLACER, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)


def test_tables_fold_on_an_80_column_terminal_instead_of_cutting(tmp_path):
    scenario = EXAMPLES / "pdd-two-dc.yaml"
    for argv in (("compare", scenario, "--no-break-even"), ("optimize", scenario, "--no-marginals")):
        r = _narrow(*argv)
        assert r.returncode == 0, r.stderr
        assert "…" not in r.stdout, argv[0]
        assert max(len(line) for line in r.stdout.splitlines()) <= 80
    folded = _narrow("compare", scenario, "--no-break-even").stdout  # one "header: value" line per cell
    assert re.search(r"^  served/ offered: \d+\.\d\d/10$", folded, re.M)


def test_compare_is_a_table_on_a_120_column_terminal():
    """The baselines table fits 120 columns as a table (it needed 177 and folded to blocks below that)."""
    text = run("compare", EXAMPLES / "pdd-two-dc.yaml", "--no-break-even", timeout=300).stdout
    table = [line for line in text.splitlines() if line.startswith(("┃", "│"))]
    assert len(table) >= 6 and max(len(line) for line in table) <= 120
    assert any(line.startswith("│ same-dc-pd ") for line in table)


def test_compare_is_honest_about_load_wan_and_twins():
    """On the flagship same-DC PD carries about 5 of 10 req/s: it is shown so, and again scaled to
    the whole load with the chips it took; cross-DC PD's WAN is one direction against its
    capacity and it says why it misses the SLA; hetero-same-DC PD says it is same-DC PD."""
    r = run("compare", EXAMPLES / "pdd-two-dc.yaml", "--no-break-even", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    same = out["baselines"]["same-dc-pd"]
    assert same["metrics"]["served_rps"] < same["metrics"]["offered_rps"]
    scaled = out["scaled"]["same-dc-pd"]
    assert scaled["metrics"]["served_rps"] == pytest.approx(scaled["metrics"]["offered_rps"], rel=1e-3)
    chips = sum(p["count"] * p["tp"] for p in scaled["pools"])
    assert chips > 96 and f"took {chips} Ascend-910B in dc-a (inventory 96)" in scaled["baseline"]["scaled"]
    cross = out["baselines"]["cross-dc-pd"]
    assert all(link["gbit_per_s_used"] <= link["gbit_per_s_capacity"] for link in cross["links"])
    assert cross["baseline"]["verdict"].startswith("cannot meet the SLA: ")
    assert "cannot carry" in cross["baseline"]["cannot_carry"]
    hetero = out["baselines"]["hetero-same-dc-pd"]
    assert hetero["baseline"]["same_as"] == "same as same-dc-pd: no second chip type in dc-a"
    assert "hetero-same-dc-pd" not in out["scaled"]  # its twin would repeat same-dc-pd's
    # like with like: PDD too at its best BCR within the inventory, ahead of same-dc-pd there (issue 45)
    best = out["pdd_best_within_inventory"]
    assert best["notes"][0].startswith("PDD at its best BCR within the inventory")
    assert out["pdd"]["metrics"]["served_rps"] == pytest.approx(10.0, rel=1e-3)  # pdd: still the whole load
    beside = out["within_inventory"]["baselines"]["same-dc-pd"]
    # with the heavy/light P split PDD is ahead at the whole load too (+16.9 %: 271.2 vs 232.0), and its
    # whole-load plan is its best BCR (before: -7.6 % whole, +4.3 % best)
    assert beside["pdd_best_bcr_change_pct"] >= beside["pdd_bcr_change_pct"] > 0
    said = re.search(r"same-dc-pd serves .*: PDD ([+-][0-9.]+) %", out["headline"].splitlines()[0])
    # the headline rounds the ratio once to 0.1; the JSON keeps it to 0.01 (17.75 and "+17.7" are the same figure)
    assert said and abs(float(said.group(1)) - beside["pdd_bcr_change_pct"]) <= 0.05 + 1e-9
    text = run("compare", EXAMPLES / "pdd-two-dc.yaml", "--no-break-even", timeout=300).stdout
    assert "nan" not in text and "at equal load" in text and "PDD serves 10.00 / 10 req/s" in text
    cross_wan = max(link["gbit_per_s_used"] for link in cross["links"])
    assert f"{cross_wan:.2f}/25 dc-a->dc-b" in text


def _relay_case(tmp_path: Path) -> Path:
    """A relay-heavy scenario (the agreement cases' 10g-low-hit): its plan relays and binds rows. The
    flagship's no longer relays (its heavy/light P split prefills the cold classes apart, issue 45)."""
    from bench.agreement_cases import CASES, small_pdd_dict

    return write(tmp_path, small_pdd_dict(**CASES["10g-low-hit"]))


def test_optimize_says_why_the_plan_looks_so(tmp_path):
    scenario = _relay_case(tmp_path)
    r = run("optimize", scenario, timeout=300)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "why this plan" in text and "utilisation" in text and "KV GiB used / capacity" in text
    # the relayed classes' reason: some miss the budget on P-MD, or all fit it and relaying pays
    assert "P-RLD-MD carries" in text and ("would miss the 1 s TTFT budget on P-MD" in text
                                           or "P-MD would meet the 1 s budget" in text)
    assert "largest marginal first" in text
    assert "routes (grouped by pipeline and datacenter pair)" in text
    plan = json.loads(run("optimize", scenario, "--json", "--no-marginals").stdout)
    relayed = sum(r["rps"] for r in plan["routes"] if r["pipeline"] == "P-RLD-MD")
    assert f"{relayed:.2f}" in text and f"{relayed:.4f}" not in text  # one grouped row, 2 decimals


def test_a_min_cost_plan_says_why_its_marginals_are_missing(tmp_path):
    r = run("optimize", _relay_case(tmp_path), "--objective", "min-cost", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "inventory[dc-a,H100-SXM]" in r.stdout  # the relay case's min-cost plan has binding rows
    assert "re-solved for --objective bcr only" in " ".join(r.stdout.split())


def test_a_long_solve_says_it_is_working_on_stderr_and_json_stays_clean(tmp_path, monkeypatch):
    """Past PROGRESS_AFTER_S (2 s; 0 here) a solve prints one "solving…" line on stderr when it is not a
    terminal (a spinner with the elapsed time on one); stdout stays the plan JSON."""
    from placer.cli import output

    monkeypatch.setattr(output, "PROGRESS_AFTER_S", 0.0)
    result = CliRunner().invoke(app, ["optimize", str(write(tmp_path, micro_dict())), "--json", "--no-verify",
                                      "--no-marginals"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("solving…") == 1
    assert json.loads(result.stdout)["pools"]
    monkeypatch.setattr(output, "PROGRESS_AFTER_S", 60.0)  # a quick solve prints nothing
    quick = CliRunner().invoke(app, ["optimize", str(write(tmp_path, micro_dict())), "--json", "--no-verify",
                                     "--no-marginals"])
    assert quick.stderr == ""
