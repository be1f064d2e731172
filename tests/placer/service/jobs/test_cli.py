"""`placer jobs add|list|run-now|remove` on a database given by --database-url."""

from __future__ import annotations

import json
import time

import yaml
from typer.testing import CliRunner

from placer.cli import app
from tests.db.support import two_dc, write_trace

runner = CliRunner()


def _invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_add_list_run_now_remove(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    scenario = tmp_path / "two-dc.yaml"
    scenario.write_text(yaml.safe_dump(two_dc()))
    trace = write_trace(tmp_path / "trace.jsonl", 0.99)

    added = _invoke("jobs", "add", "hourly", "--scenario", scenario, "--every", "1h", "--trace", trace,
                    "--min-gain", "3", "--mode", "apply", "--database-url", url, "--json")
    assert added.exit_code == 0, added.output
    job = json.loads(added.stdout)
    assert job["schedule"] == {"kind": "interval", "seconds": 3600.0}
    assert job["policy"]["min_bcr_gain_pct"] == 3.0 and job["policy"]["mode"] == "apply"

    listed = json.loads(_invoke("jobs", "list", "--database-url", url, "--json").stdout)
    assert [j["name"] for j in listed] == ["hourly"] and listed[0]["last_run"] is None

    first = _invoke("jobs", "run-now", "hourly", "--database-url", url, "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["outcome"] == "INITIAL"
    write_trace(trace, 0.90)
    second = json.loads(_invoke("jobs", "run-now", str(job["id"]), "--database-url", url, "--json").stdout)
    assert second["outcome"] == "ADOPTED" and second["gain_pct"] > 3.0
    table = _invoke("jobs", "list", "--database-url", url)
    assert "hourly" in table.output and "ADOPTED" in table.output

    removed = _invoke("jobs", "remove", "hourly", "--database-url", url)
    assert removed.exit_code == 0 and "removed job" in removed.output
    assert json.loads(_invoke("jobs", "list", "--database-url", url, "--json").stdout) == []


def test_mistakes_exit_2_with_a_message_and_no_traceback(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    trace = write_trace(tmp_path / "trace.jsonl", 0.99)
    cases = [
        (["jobs", "add", "x", "--scenario", "nowhere", "--every", "1h", "--trace", trace],
         "scenario 'nowhere' not found"),
        (["jobs", "add", "x", "--scenario", "s", "--every", "1h", "--cron", "0 * * * *", "--trace", trace],
         "at most one of --every and --cron"),
        (["jobs", "add", "x", "--scenario", "s", "--every", "1h"], "--request-log FILE"),
        (["jobs", "add", "x", "--scenario", "s", "--request-log", trace, "--request-log-window", "soon"],
         "--request-log-window: not a duration"),
        (["jobs", "add", "x", "--scenario", "s", "--request-log", trace, "--mode", "auto"], "'auto' is not one of"),
        (["jobs", "add", "x", "--scenario", "s", "--request-log", trace, "--objective", "speed"],
         "'speed' is not one of"),
        (["jobs", "add", "x", "--scenario", "s", "--cron", "61 * * * *", "--trace", trace], "crontab"),
        (["jobs", "add", "x", "--scenario", "s", "--every", "soon", "--trace", trace], "--every"),
        (["jobs", "add", "x", "--scenario", "s", "--every", "1h", "--trace", tmp_path / "no.jsonl"], "--request-log"),
        (["jobs", "run-now", "ghost"], "job 'ghost' not found"),
        (["jobs", "remove", "ghost"], "job 'ghost' not found"),
    ]
    for args, words in cases:
        result = _invoke(*args, "--database-url", url)
        assert result.exit_code == 2, (args, result.output)
        assert words in result.output and "Traceback" not in result.output


def _shift(path, start_unix_s: float) -> None:
    """The trace's timestamps as a request log's: Unix times from ``start_unix_s``."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "timestamp": r["timestamp"] + start_unix_s * 1000}) + "\n"
                            for r in lines))


def test_a_request_log_file_with_a_window_fits_its_last_window_or_is_skipped(tmp_path):
    """``jobs add --request-log FILE --request-log-window 1h``: what ``deploy --request-log FILE``
    logged in the last hour; an hour with too few requests is SKIPPED, naming the file."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    scenario = tmp_path / "two-dc.yaml"
    scenario.write_text(yaml.safe_dump(two_dc()))
    log = write_trace(tmp_path / "reqlog.jsonl", 0.99)  # 400 requests over 100 s
    _shift(log, time.time() - 3 * 3600)
    added = _invoke("jobs", "add", "nightly", "--scenario", scenario, "--request-log", log, "--request-log-window",
                    "1h", "--database-url", url, "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["workload"]["window_s"] == 3600.0
    assert "reqlog.jsonl, last 3600 s" in _invoke("jobs", "list", "--database-url", url).output
    stale = json.loads(_invoke("jobs", "run-now", "nightly", "--database-url", url, "--json").stdout)
    assert stale["outcome"] == "SKIPPED" and "in the last 3600 s of reqlog.jsonl" in stale["reason"], stale
    write_trace(log, 0.99)
    _shift(log, time.time() - 120)
    fresh = json.loads(_invoke("jobs", "run-now", "nightly", "--database-url", url, "--json").stdout)
    assert fresh["outcome"] == "INITIAL", fresh


def test_a_failed_run_exits_1_and_says_why(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    scenario = tmp_path / "two-dc.yaml"
    scenario.write_text(yaml.safe_dump(two_dc()))
    trace = write_trace(tmp_path / "trace.jsonl", 0.99)
    assert _invoke("jobs", "add", "j", "--scenario", scenario, "--every", "1h", "--trace", trace,
                   "--database-url", url).exit_code == 0
    trace.write_text("not json\n")
    result = _invoke("jobs", "run-now", "j", "--database-url", url)
    assert result.exit_code == 1 and "FAILED" in result.output and "not valid JSON" in result.output


def test_first_run_a_job_without_a_schedule_runs_on_run_now_and_choices_are_listed(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    scenario = tmp_path / "two-dc.yaml"
    scenario.write_text(yaml.safe_dump(two_dc()))
    log = write_trace(tmp_path / "reqlog.jsonl", 0.99)
    help_text = runner.invoke(app, ["jobs", "add", "--help"], env={"COLUMNS": "200"}).output
    assert "propose|apply" in help_text and "bcr|min-cost|max-goodput" in help_text
    assert "FILE|db" in help_text

    added = _invoke("jobs", "add", "adhoc", "--scenario", scenario, "--request-log", log, "--database-url", url,
                    "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["schedule"] == {"kind": "manual"}
    assert "run-now only" in runner.invoke(app, ["jobs", "list", "--database-url", url], env={"COLUMNS": "200"}).output
    ran = _invoke("jobs", "run-now", "adhoc", "--database-url", url, "--json")
    assert ran.exit_code == 0 and json.loads(ran.stdout)["outcome"] == "INITIAL"


def test_names_with_rich_markup_do_not_break_jobs_list(tmp_path):
    """A job or scenario named like Rich markup ([/], [bold]) is printed as written (issue 18 item 2)."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({**two_dc(), "name": "[bold]x[/]"}))
    log = write_trace(tmp_path / "reqlog.jsonl", 0.99)
    for name in ("[/]", "[red]job"):
        assert _invoke("jobs", "add", name, "--scenario", scenario, "--request-log", log,
                       "--database-url", url).exit_code == 0
    listed = runner.invoke(app, ["jobs", "list", "--database-url", url], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert "[/]" in listed.output and "[red]job" in listed.output and "[bold]x[/]" in listed.output
    narrow = runner.invoke(app, ["jobs", "list", "--database-url", url], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0 and "…" not in narrow.output  # folds, one block per job; nothing cut
    assert "[red]job" in narrow.output and "schedule: run-now only" in narrow.output
    assert max(len(line) for line in narrow.output.splitlines()) <= 80


def test_plans_import_stores_a_cli_plan_for_the_service(tmp_path):
    from placer.optimize import optimize
    from placer.specs import parse_scenario

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(optimize(parse_scenario(two_dc())).to_json())
    stored = _invoke("plans", "import", plan_file, "--database-url", url, "--json")
    assert stored.exit_code == 0, stored.output
    plan_id = json.loads(stored.stdout)["id"]
    import db
    from db import repo

    engine, factory = db.connect(url)
    with factory() as s:
        row = repo.get_plan(s, plan_id)
        assert row.source == "cli" and row.plan["scenario"] == "two-dc"
    engine.dispose()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    refused = _invoke("plans", "import", bad, "--database-url", url)
    assert refused.exit_code == 2 and "Traceback" not in refused.output


def test_serve_prints_its_url_and_how_to_sign_in_but_not_a_token_from_the_environment(monkeypatch):
    import placer.service.http as service_http

    monkeypatch.setattr(service_http, "serve", lambda *a, **k: None)
    monkeypatch.setenv("PLACER_API_TOKEN", "environment-secret-token")
    monkeypatch.setenv("PLACER_DATABASE_URL", "sqlite://")
    result = runner.invoke(app, ["serve"])
    assert result.exit_code == 0, result.output
    assert "http://127.0.0.1:8080" in result.output and "/ui/" in result.output
    assert "PLACER_API_TOKEN" in result.output and "environment-secret-token" not in result.output
    monkeypatch.delenv("PLACER_API_TOKEN")
    generated = runner.invoke(app, ["serve", "--port", "9001"])
    assert "http://127.0.0.1:9001" in generated.output and "generated for this run" in generated.output
