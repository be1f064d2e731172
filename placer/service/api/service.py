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
        self._queued = 0
        self._lock = threading.Lock()

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        self.engine = make_engine(self.settings.database_url)
        if self.settings.migrate:
            migrate.upgrade(self.engine)
        self.factory = session_factory(self.engine)
        self.pool = ThreadPoolExecutor(self.settings.solve_workers, thread_name_prefix="placer-solve")
        self._recover_solve_jobs()
        runner.recover_runs(self.factory)  # replanning runs left PENDING/RUNNING by a crash: FAILED, unlocked
        if self.settings.scheduler:
            self.scheduler = ReplanScheduler(self.factory, max_workers=self.settings.solve_workers,
                                             sync_interval_s=self.settings.scheduler_sync_s)
            self.scheduler.start()

    def stop(self) -> None:
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=True)
            self.scheduler = None
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=False)
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
        outcome = solve.run(self.factory, job_id)
        if outcome is not None:
            self.metrics.observe_solve(outcome.objective, outcome.status.value, outcome.seconds)

    def submit_run(self, run_id: int) -> Future:
        return self.submit(self._run, run_id, force=True)

    def _run(self, run_id: int) -> None:
        runner.execute(self.factory, run_id)

    def sync_scheduler(self) -> None:
        if self.scheduler is not None:
            self.scheduler.sync()
