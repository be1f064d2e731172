"""Prometheus metrics of one service (its own registry, so two apps never clash).

* ``placer_solve_seconds`` (histogram; labels objective, status): wall time of solve jobs
* ``placer_solve_jobs`` (gauge; label status): solve jobs in the database by status
* ``placer_replan_runs`` (gauge; label outcome): replanning runs by outcome
* ``placer_queued_jobs`` (gauge): work waiting for or running on the worker pool
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from db import repo

if TYPE_CHECKING:
    from placer.service.api.service import Service

log = logging.getLogger(__name__)

SOLVE_BUCKETS_S = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class _DatabaseCollector:
    def __init__(self, service: Service):
        self.service = service

    def collect(self):
        queued = GaugeMetricFamily("placer_queued_jobs", "Jobs waiting for or running on the worker pool.")
        queued.add_metric([], self.service._queued)
        yield queued
        if self.service.factory is None:
            return
        try:
            with self.service.factory() as session:
                solve = repo.solve_jobs_by_status(session)
                runs = repo.runs_by_outcome(session)
        except Exception:  # a scrape must not fail because the database is away
            log.exception("metrics: cannot read job counts")
            return
        jobs = GaugeMetricFamily("placer_solve_jobs", "Solve jobs by status.", labels=["status"])
        for status, n in sorted(solve.items()):
            jobs.add_metric([status], n)
        yield jobs
        outcomes = GaugeMetricFamily("placer_replan_runs", "Replanning runs by outcome.", labels=["outcome"])
        for outcome, n in sorted(runs.items()):
            outcomes.add_metric([outcome], n)
        yield outcomes


class Metrics:
    def __init__(self, service: Service):
        self.registry = CollectorRegistry()
        self.solve_seconds = Histogram("placer_solve_seconds", "Wall time of solve jobs, seconds.",
                                       ["objective", "status"], buckets=SOLVE_BUCKETS_S, registry=self.registry)
        self.registry.register(_DatabaseCollector(service))

    def observe_solve(self, objective: str, status: str, seconds: float) -> None:
        self.solve_seconds.labels(objective=objective or "unknown", status=status).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
