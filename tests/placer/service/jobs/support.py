"""Helpers of the replanning tests."""

from __future__ import annotations

from tests.db.support import two_dc


def add_job(factory, trace_path=None, name: str = "replan", source: dict | None = None, **policy) -> int:
    from db import repo
    from db.session import session_scope

    with session_scope(factory) as s:
        scenario = repo.find_scenario(s, "two-dc") or repo.create_scenario(s, two_dc())
        job = repo.create_job(
            s, name=name, scenario_id=scenario.id, schedule={"kind": "interval", "seconds": 3600},
            workload=source or {"kind": "trace", "path": str(trace_path)},
            policy={"mode": "propose", "min_bcr_gain_pct": 5.0, **policy}, objective="bcr", solver="ortools",
            time_limit_s=20.0)
        return job.id
