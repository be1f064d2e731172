"""Scheduled replanning and solve jobs: the service's work, shared by the API and the CLI.

Entry points: :func:`runner.trigger` / :func:`runner.execute` / :func:`runner.run_now`
(one replanning run), :class:`ReplanScheduler` (APScheduler, one per service),
:func:`solve.submit` / :func:`solve.run` (the solve jobs behind ``POST /plans``),
:func:`plan_diff`, and the job specs :class:`Policy`, schedules and workload sources.
Modules import what they use at the top (the solver, APScheduler, db): only the service
imports this package, never the planner library.
"""

from placer.service.jobs.diff import plan_diff
from placer.service.jobs.scheduler import ReplanScheduler
from placer.service.jobs.specs import (
           CronSchedule,
           IntervalSchedule,
           ManualSchedule,
           Policy,
           RequestLogSource,
           Schedule,
           TraceSource,
           WorkloadSource,
)

__all__ = ["CronSchedule", "IntervalSchedule", "ManualSchedule", "Policy", "ReplanScheduler", "RequestLogSource",
           "Schedule", "TraceSource", "WorkloadSource", "plan_diff"]
