"""The replanning scheduler: one APScheduler 3 ``BackgroundScheduler`` per service.

in:  the ``jobs`` table (enabled jobs with an interval or cron schedule)
out: runs triggered on schedule (``placer.service.jobs.runner``), on a bounded thread pool

The database is the truth: :meth:`ReplanScheduler.sync` reconciles the scheduled
entries with the table, at start, every ``sync_interval_s`` (so jobs added by
``placer jobs add`` in another process are picked up) and whenever the API changes a
job. Each scheduled fire carries an idempotency key derived from its slot (interval
schedules are anchored at the job's creation time, cron slots are minutes), so two
services on one database firing the same slot make one run, not two.
"""

from __future__ import annotations

import logging
import math
import time
from datetime import datetime, timezone

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.orm import Session, sessionmaker

from db import repo
from db.errors import NotFoundError
from placer.service.jobs import runner

log = logging.getLogger(__name__)

SYNC_ID = "placer-sync"


def _job_id(job_id: int) -> str:
    return f"replan-{job_id}"


def slot_key(job_id: int, schedule: dict, anchor: datetime, now: datetime) -> str:
    """Idempotency key of the schedule slot that fired at ``now``."""
    if schedule["kind"] == "interval":
        k = round((now - anchor).total_seconds() / float(schedule["seconds"]))
    else:
        k = math.floor(now.timestamp() / 60.0)
    return f"schedule:{job_id}:{k}"


class ReplanScheduler:
    """Owns the APScheduler instance; start() once, shutdown() at service exit."""

    def __init__(self, factory: sessionmaker[Session], max_workers: int = 2, sync_interval_s: float = 30.0,
                 misfire_grace_s: int = 300, children=None, margin_s: float | None = None):
        self.factory = factory
        self.children, self.margin_s = children, margin_s  # runs' solves in child processes (runner.execute)
        self.max_workers = max_workers
        self.sync_interval_s = sync_interval_s
        self.misfire_grace_s = misfire_grace_s
        self._signatures: dict[str, tuple] = {}
        self._scheduler = None

    @property
    def running(self) -> bool:
        return self._scheduler is not None and self._scheduler.running

    def start(self) -> None:
        if self._scheduler is not None:
            return
        self._scheduler = BackgroundScheduler(
            timezone=timezone.utc,
            executors={"default": ThreadPoolExecutor(self.max_workers)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": self.misfire_grace_s},
        )
        self._scheduler.start()
        self.sync()
        self._scheduler.add_job(self.sync, "interval", seconds=self.sync_interval_s, id=SYNC_ID,
                                replace_existing=True)

    def shutdown(self, wait: bool = True) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=wait)
            self._scheduler = None
            self._signatures.clear()

    def scheduled(self) -> dict[int, datetime | None]:
        """Job id → next fire time of what is scheduled now."""
        if self._scheduler is None:
            return {}
        return {int(j.id.split("-", 1)[1]): j.next_run_time for j in self._scheduler.get_jobs()
                if j.id.startswith("replan-")}

    def _trigger(self, schedule: dict, anchor: datetime):
        if schedule["kind"] == "interval":
            return IntervalTrigger(seconds=float(schedule["seconds"]), start_date=anchor, timezone=timezone.utc)
        return CronTrigger.from_crontab(schedule["expr"], timezone=timezone.utc)

    def sync(self) -> None:
        """Make the scheduled entries match the enabled jobs in the database."""
        if self._scheduler is None:
            return
        try:
            with self.factory() as session:
                jobs, _ = repo.list_jobs(session, enabled=True, limit=100_000)
                wanted = {_job_id(j.id): (j.id, dict(j.schedule), j.created_at) for j in jobs
                          if j.schedule.get("kind") != "manual"}  # manual jobs run only when triggered
        except Exception:  # the database is away: keep what is scheduled, try again next tick
            log.exception("replanning scheduler: cannot read jobs")
            return
        for sid in list(self._signatures):
            if sid not in wanted:
                self._remove(sid)
        for sid, (job_id, schedule, anchor) in wanted.items():
            signature = (tuple(sorted(schedule.items())), anchor)
            if self._signatures.get(sid) == signature:
                continue
            try:
                trigger = self._trigger(schedule, anchor)
            except (ValueError, KeyError, TypeError):
                log.exception("replanning job %s has an unusable schedule %r", job_id, schedule)
                continue
            self._scheduler.add_job(self._fire, trigger, args=(job_id, schedule, anchor), id=sid,
                                    replace_existing=True)
            self._signatures[sid] = signature

    def _remove(self, sid: str) -> None:
        try:
            self._scheduler.remove_job(sid)
        except JobLookupError:
            pass
        self._signatures.pop(sid, None)

    def _fire(self, job_id: int, schedule: dict, anchor: datetime, now: datetime | None = None) -> None:
        """One scheduled fire: trigger under the slot's key, execute if this fire made the run."""
        now = now or datetime.now(timezone.utc)
        try:
            t = runner.trigger(self.factory, job_id, "schedule", slot_key(job_id, schedule, anchor, now))
        except NotFoundError:  # removed since the last sync
            self._remove(_job_id(job_id))
            return
        except Exception:
            log.exception("replanning job %s: trigger failed", job_id)
            return
        if t.created:
            start = time.perf_counter()
            extra = {} if self.margin_s is None else {"margin_s": self.margin_s}
            outcome = runner.execute(self.factory, t.run_id, children=self.children, **extra)
            log.info("replanning job %s run %s: %s in %.1f s", job_id, t.run_id,
                     outcome.value if outcome else "FAILED", time.perf_counter() - start)
