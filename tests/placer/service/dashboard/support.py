"""Seeding and serving for the dashboard tests: a temp SQLite database with two plans of
the micro scenario (plus a replanning job with runs), the app with the dashboard
mounted, a uvicorn server on a free port, and a headless Chromium when one is installed."""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]  # the repository root
ARTIFACTS = ROOT / "test-artifacts"
TOKEN = "dashboard-test-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHROMIUM = os.environ.get("PLACER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

#: llama-3.1-8b on a few H100s and L40S: each solve takes well under a second.
MICRO = {
    "name": "micro", "model": "llama-3.1-8b", "kv_dtype": "bf16",
    "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 4}}, {"name": "dc-b", "inventory": {"L40S": 4}}],
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 10, "rtt_ms": 20}],
    "workload": {"arrival_rps": 6.0, "classes": [
        {"name": "hot", "share": 0.8, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.95},
        {"name": "cold", "share": 0.15, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.3},
        {"name": "odd", "share": 0.05, "input_tokens": 16384, "output_tokens": 128, "hit_rate": 0.1}]},
    "sla": {"ttft_p90_s": 2.0, "tpot_s": 0.05},
    "options": {"tp_degrees": [1, 2], "filter_min_input_tokens": 8192},
}


def micro(arrival_rps: float = 6.0) -> dict:
    data = copy.deepcopy(MICRO)
    data["workload"]["arrival_rps"] = arrival_rps
    return data


def solve_micro_pair():
    """(plan at 6 req/s with marginals, plan at 4 req/s): the lighter load needs fewer decode
    instances, so some pools shrink or go (:func:`pool_changes` says which)."""
    from placer.optimize import SolveConfig, optimize
    from placer.specs import parse_scenario

    return optimize(parse_scenario(micro(6.0))), optimize(parse_scenario(micro(4.0)), SolveConfig(marginals=False))


@dataclass
class Seeded:
    url: str
    plan_a: int
    plan_b: int
    job_id: int
    run_ids: list[int]
    changes: dict[tuple[str, str, str, str, str], str]  # (dc, chip, tp, from, to) -> changed|removed|added


def pool_changes(plan_a, plan_b) -> dict[tuple[str, str, str, str, str], str]:
    """What a reader of the diff page should see, worked out from the two plans' pools."""
    def counts(plan):
        return {(p.role, p.datacenter, p.chip, p.tp): p.count for p in plan.pools if p.count > 0}

    a, b = counts(plan_a), counts(plan_b)
    out = {}
    for key in sorted(set(a) | set(b)):
        before, after = a.get(key, 0), b.get(key, 0)
        if before != after:
            kind = "removed" if after == 0 else "added" if before == 0 else "changed"
            out[(key[1], key[2], str(key[3]), str(before), str(after))] = kind
    return out


def seed(url: str, plan_a, plan_b) -> Seeded:
    """Store the micro scenario, both plans and a propose-mode job with two runs."""
    import db
    from db import repo
    from db.models import RunOutcome, RunStatus
    from db.types import utcnow
    from placer.service.jobs.diff import plan_diff
    from placer.service.store import save_plan

    engine, factory = db.connect(url)
    try:
        with db.session_scope(factory) as s:
            scenario = repo.create_scenario(s, micro())
            a = save_plan(s, plan_a, inputs={"scenario": micro(6.0)}, scenario_id=scenario.id, source="api")
            b = save_plan(s, plan_b, inputs={"scenario": micro(4.0)}, scenario_id=scenario.id,
                               source="job:1")
            job = repo.create_job(s, name="micro-nightly", scenario_id=scenario.id,
                                  schedule={"kind": "interval", "seconds": 3600.0},
                                  workload={"kind": "request_log", "window_s": 3600.0, "min_requests": 20},
                                  policy={"mode": "propose", "min_bcr_gain_pct": 0.0, "cooldown_s": 0.0},
                                  objective="bcr", solver="ortools", time_limit_s=30.0, enabled=True,
                                  current_plan_id=a.id)
            now = utcnow()
            first, _ = repo.create_run(s, job.id, "schedule")
            first.status, first.outcome, first.plan_id = RunStatus.SUCCEEDED, RunOutcome.INITIAL, a.id
            first.new_bcr, first.reason = plan_a.metrics.bcr_requests_per_usd, "the job had no plan: this one is it"
            first.started_at, first.finished_at = now - timedelta(hours=1, seconds=3), now - timedelta(hours=1)
            second, _ = repo.create_run(s, job.id, "manual")
            gain = 100 * (plan_b.metrics.bcr_requests_per_usd / plan_a.metrics.bcr_requests_per_usd - 1)
            second.status, second.outcome = RunStatus.SUCCEEDED, RunOutcome.PROPOSED
            second.baseline_plan_id, second.plan_id = a.id, b.id
            second.baseline_bcr, second.new_bcr, second.gain_pct = (plan_a.metrics.bcr_requests_per_usd,
                                                                    plan_b.metrics.bcr_requests_per_usd, gain)
            second.diff = plan_diff(plan_a, plan_b)
            second.reason = f"BCR {gain:+.1f} % clears the 0 % threshold: proposed"
            second.started_at, second.finished_at = now - timedelta(seconds=2), now
            s.flush()
            return Seeded(url, a.id, b.id, job.id, [first.id, second.id], pool_changes(plan_a, plan_b))
    finally:
        engine.dispose()


def make_app(url: str, public: bool = False):
    from placer.service.api import Settings, create_app
    from placer.service.dashboard import mount

    app = create_app(Settings(token=TOKEN, database_url=url, scheduler=False))
    mount(app, public=public)
    return app




def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set PLACER_TEST_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; no `playwright install` needed)"
    return None


@contextmanager
def chromium() -> Iterator[object]:
    """A headless Debian Chromium driven by Playwright (sync API)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def artifact(*parts: str) -> Path:
    path = ARTIFACTS.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
