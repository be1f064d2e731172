"""Helpers of the serving tests: a serving config for the in-process cluster, a one-pipeline policy."""

from __future__ import annotations

from typing import Any

from executor.config import ServingConfig
from executor.routing import Pipeline, RoutingPolicy
from placer.pdd import FilterRule


def serving(**fields: Any) -> ServingConfig:
    """A `ServingConfig` with heartbeats off unless asked (the tests drive health themselves)."""
    return ServingConfig(**{"heartbeat_s": None, **fields})


def only(*pipelines: Pipeline) -> RoutingPolicy:
    """A policy that sends everything down `pipelines` (the filter thresholds let anything through)."""
    return RoutingPolicy(allowed=frozenset(pipelines), filter_rule=FilterRule(1, 1.0, 10**6))
