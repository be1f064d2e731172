"""The serving config: built once from a plan (+ scenario) and the options, validated at construction."""

from __future__ import annotations

import pytest

from executor.config import ServingConfig
from executor.routing import Pipeline
from executor.transport.shaping import LinkShape
from placer.plan import Plan
from tests.executor.support import only

PLAN = Plan.model_validate({
    "scenario": "two-dc",
    "pools": [{"role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
              {"role": "RLD", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
              {"role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": 1}],
    "routes": [{"request_class": "lo", "pipeline": "P-RLD-MD", "src": "dc-a", "dst": "dc-b", "rps": 1.0}],
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s_capacity": 25.0}],
    "handoff": {"mode": "one-shot", "catch_up_threshold_tokens": 48},
})


def test_a_plan_gives_its_pipelines_handoff_lines_and_front_datacenter():
    config = ServingConfig.from_plan(PLAN, link_rtt_ms=7.0)
    assert config.routing.allowed == {Pipeline.P_RLD_MD}
    assert (config.handoff.mode, config.handoff.catch_up_threshold_tokens) == ("one-shot", 48)
    line = config.links[frozenset(("dc-a", "dc-b"))]
    assert (line.gbit_per_s, line.rtt_ms) == (25.0, 7.0)
    assert config.router_datacenter == "dc-a"
    assert (config.heartbeat_s, config.max_attempts) == (0.5, 4)  # the router's defaults


def test_options_override_what_the_plan_implies():
    line = {frozenset(("dc-a", "dc-b")): LinkShape(1.0, 2.0)}
    config = ServingConfig.from_plan(PLAN, links=line, routing=only(Pipeline.P_MD), heartbeat_s=None)
    assert config.links == line and config.routing.allowed == {Pipeline.P_MD} and config.heartbeat_s is None


@pytest.mark.parametrize("field, value", [("stall_s", 0.0), ("request_timeout_s", -1.0), ("heartbeat_s", 0.0),
                                          ("max_attempts", 0)])
def test_a_bad_value_is_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        ServingConfig(**{field: value})
