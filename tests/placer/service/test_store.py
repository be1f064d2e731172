"""Plans go into db as their contract JSON and come back as the same Plan."""

from __future__ import annotations

import pytest

from placer.plan import Metrics, Plan, PoolOut
from placer.service.store import plan_document, save_plan, stored_plan


@pytest.fixture
def factory(tmp_path):
    import db

    engine, factory = db.connect(f"sqlite:///{tmp_path / 'store.db'}")
    yield factory
    engine.dispose()


def test_stored_plan_round_trips_to_the_same_plan(factory):
    import db
    from db import repo

    plan = Plan(scenario="micro", pools=[PoolOut(role="P", datacenter="dc-a", chip="H100-SXM", tp=1, count=1)],
                metrics=Metrics(bcr_requests_per_usd=123.0, cost_usd_per_h=4.0, goodput_rps=1.0))
    with db.session_scope(factory) as s:
        row = save_plan(s, plan, inputs={}, source="cli")
    with factory() as s:
        stored = repo.get_plan(s, row.id)
        assert stored_plan(stored) == plan
        assert stored.plan == plan_document(plan) == plan.model_dump(mode="json", exclude_none=True)
        assert (stored.bcr_requests_per_usd, stored.cost_usd_per_h, stored.source) == (123.0, 4.0, "cli")
