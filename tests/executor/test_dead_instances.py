"""A dead instance is neither healthy nor kept (issue 43): the rule in `diff_specs`, and the same story
in one process over TCP — an MD dies without telling anyone, the heartbeats mark it DOWN, `/health`
names it, and re-applying the running plan starts it again. (On Ray with a SIGKILL:
tests/executor/test_ray_dead_instance.py.)"""

from __future__ import annotations

import time
import warnings

from executor.cluster import LocalCluster
from executor.elastic import diff_specs
from executor.placement import InstanceSpec
from executor.server import create_app
from tests.executor.support import serving

SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("md0", "MD", "dc-a", "A"),
         InstanceSpec("md1", "MD", "dc-a", "A")]


def test_a_dead_instance_is_replaced_not_kept():
    diff = diff_specs(SPECS, SPECS, dead={"md0"})
    assert diff.keep == ["p0", "md1"]
    assert [s.name for s in diff.add] == ["md0"] and diff.remove == ["md0"]
    assert diff_specs(SPECS, SPECS).empty  # alive: nothing to do
    gone = diff_specs(SPECS, SPECS[:2] + [InstanceSpec("md2", "MD", "dc-a", "A")], dead={"md1"})
    assert gone.keep == ["p0", "md0"] and gone.remove == ["md1"] and [s.name for s in gone.add] == ["md2"]


def test_heartbeats_report_a_silently_dead_md_and_apply_starts_it_again(model_config, engine_config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    config = serving(heartbeat_s=0.1)
    cluster = LocalCluster(SPECS[:2], model_config, engine_config, config)
    try:
        with TestClient(create_app(cluster.router)) as client:
            assert client.get("/health").json() == {"status": "ok", "instances": {"P": 1, "MD": 1}}
            cluster.kill("md0", tell_router=False)  # the process is gone; only the heartbeats can tell
            bound_s = cluster.router.health.down_after * config.heartbeat_s + 1.0
            end = time.monotonic() + bound_s
            while (body := client.get("/health").json())["status"] == "ok" and time.monotonic() < end:
                time.sleep(0.05)
            assert body == {"status": "degraded", "instances": {"P": 1}, "down": ["md0"]}

            report = cluster.apply_plan(SPECS[:2], grace_s=0.5, ready_timeout_s=10)
            assert report.failed is None and report.diff.keep == ["p0"] and report.joined == ["md0"]
            assert client.get("/health").json() == {"status": "ok", "instances": {"P": 1, "MD": 1}}
            served = client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 3})
            assert served.status_code == 200 and len(served.json()["choices"][0]["token_ids"]) == 3
    finally:
        cluster.close()
