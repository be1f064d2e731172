"""What a running service holds: engine, sessions, the bounded worker pool, the scheduler,
the metrics. Created by the app factory, started and stopped by the app's lifespan.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from db import migrate, repo
from db.models import SolveStatus
from db.session import make_engine, session_factory, session_scope
from placer.service.api.metrics import Metrics
from placer.service.jobs import ReplanScheduler, runner, solve
from placer.service.jobs.child import ChildJobs
from placer.settings import Settings

log = logging.getLogger(__name__)


class Overloaded(Exception):
    """More work queued than ``Settings.max_queued``."""


class Service:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.engine: Engine | None = None
        self.factory: sessionmaker[Session] | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.scheduler = None
        self.metrics = Metrics(self)
        self.children: ChildJobs | None = None  # solves and simulations run in child processes
        self._queued = 0
        self._lock = threading.Lock()

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        self.engine = make_engine(self.settings.database_url)
        if self.settings.migrate:
            migrate.upgrade(self.engine)
        self.factory = session_factory(self.engine)
        self.children = ChildJobs()
        self.children.warm()
        self.pool = ThreadPoolExecutor(self.settings.solve_workers, thread_name_prefix="placer-solve")
        self._recover_solve_jobs()
        runner.recover_runs(self.factory)  # replanning runs left PENDING/RUNNING by a crash: FAILED, unlocked
        if self.settings.scheduler:
            self.scheduler = ReplanScheduler(self.factory, max_workers=self.settings.solve_workers,
                                             sync_interval_s=self.settings.scheduler_sync_s,
                                             children=self.children, margin_s=self.settings.job_margin_s)
            self.scheduler.start()

    def stop(self) -> None:
        """Stop at once, even with jobs running (SIGTERM: within the server's graceful 10 s + this).

        Queued work is cancelled first (solve jobs that never started stay PENDING and run at the next
        start), then every running job's child process is killed: its job, run or request FAILS with
        "the service stopped" (not re-queued: a job that was running when the service went down may be
        the one that brought it down), and the worker threads end within a second."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        if self.children is not None:
            killed = self.children.stop("the service stopped")
            if killed:
                log.warning("service stopping: %d running job(s) killed, marked FAILED", killed)
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=True)
            self.scheduler = None
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None

    def _recover_solve_jobs(self) -> None:
        """Jobs a previous process left behind: RUNNING ones failed, PENDING ones resubmitted."""
        with session_scope(self.factory) as session:
            pending = []
            for job in repo.interrupted_solve_jobs(session):
                if job.status == SolveStatus.RUNNING:
                    repo.finish_solve_job(session, job.id, error="interrupted: the service stopped while it ran",
                                          error_status=500)
                else:
                    pending.append(job.id)
        for job_id in pending:
            self.submit_solve(job_id, force=True)

    # --- work -------------------------------------------------------------------------

    def check_capacity(self) -> None:
        with self._lock:
            if self._queued >= self.settings.max_queued:
                raise Overloaded(f"{self._queued} jobs are queued; retry later")

    def submit(self, fn: Callable[..., Any], *args: Any, force: bool = False) -> Future:
        """Run ``fn`` on the bounded pool; Overloaded when too much is queued."""
        with self._lock:
            if not force and self._queued >= self.settings.max_queued:
                raise Overloaded(f"{self._queued} jobs are queued; retry later")
            self._queued += 1
        try:
            future = self.pool.submit(fn, *args)
        except BaseException:
            with self._lock:
                self._queued -= 1
            raise
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: Future) -> None:
        with self._lock:
            self._queued -= 1

    def submit_solve(self, job_id: int, force: bool = False) -> Future:
        return self.submit(self._solve, job_id, force=force)

    def _solve(self, job_id: int) -> None:
        outcome = solve.run(self.factory, job_id, self.children, self.settings.job_margin_s)
        if outcome is not None:
            self.metrics.observe_solve(outcome.objective, outcome.status.value, outcome.seconds)

    def submit_run(self, run_id: int) -> Future:
        return self.submit(self._run, run_id, force=True)

    def _run(self, run_id: int) -> None:
        runner.execute(self.factory, run_id, children=self.children, margin_s=self.settings.job_margin_s)

    def compute(self, fn: Callable[..., Any], *args: Any, deadline: tuple[float, str], what: str,
                **hint: str) -> Any:
        """``fn(*args)`` in a child process killed at ``deadline`` or when the service stops
        (:mod:`placer.service.jobs.child`); for a request's work on the pool (simulate, compare)."""
        return self.children.run(fn, *args, deadline_s=deadline[0], why=deadline[1], what=what, **hint)

    def sync_scheduler(self) -> None:
        if self.scheduler is not None:
            self.scheduler.sync()
