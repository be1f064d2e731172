"""`placer jobs add|list|run-now|remove` on a database given by --database-url."""

from __future__ import annotations

import json

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
    job = json.loads(added.output)
    assert job["schedule"] == {"kind": "interval", "seconds": 3600.0}
    assert job["policy"]["min_bcr_gain_pct"] == 3.0 and job["policy"]["mode"] == "apply"

    listed = json.loads(_invoke("jobs", "list", "--database-url", url, "--json").output)
    assert [j["name"] for j in listed] == ["hourly"] and listed[0]["last_run"] is None

    first = _invoke("jobs", "run-now", "hourly", "--database-url", url, "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["outcome"] == "INITIAL"
    write_trace(trace, 0.90)
    second = json.loads(_invoke("jobs", "run-now", str(job["id"]), "--database-url", url, "--json").output)
    assert second["outcome"] == "ADOPTED" and second["gain_pct"] > 3.0
    table = _invoke("jobs", "list", "--database-url", url)
    assert "hourly" in table.output and "ADOPTED" in table.output

    removed = _invoke("jobs", "remove", "hourly", "--database-url", url)
    assert removed.exit_code == 0 and "removed job" in removed.output
    assert json.loads(_invoke("jobs", "list", "--database-url", url, "--json").output) == []


def test_mistakes_exit_2_with_a_message_and_no_traceback(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    trace = write_trace(tmp_path / "trace.jsonl", 0.99)
    cases = [
        (["jobs", "add", "x", "--scenario", "nowhere", "--every", "1h", "--trace", trace],
         "scenario 'nowhere' not found"),
        (["jobs", "add", "x", "--scenario", "s", "--trace", trace], "exactly one of --every and --cron"),
        (["jobs", "add", "x", "--scenario", "s", "--cron", "61 * * * *", "--trace", trace], "crontab"),
        (["jobs", "add", "x", "--scenario", "s", "--every", "soon", "--trace", trace], "--every"),
        (["jobs", "add", "x", "--scenario", "s", "--every", "1h", "--trace", tmp_path / "no.jsonl"], "--trace"),
        (["jobs", "run-now", "ghost"], "job 'ghost' not found"),
        (["jobs", "remove", "ghost"], "job 'ghost' not found"),
    ]
    for args, words in cases:
        result = _invoke(*args, "--database-url", url)
        assert result.exit_code == 2, (args, result.output)
        assert words in result.output and "Traceback" not in result.output


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
