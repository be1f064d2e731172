"""Jobs in child processes: the service's solves and simulations run where they can be stopped.

in:  a module-level function, its (picklable) arguments, a deadline in seconds
out: the function's return value; or :class:`JobDeadlineError` (killed at its deadline),
     :class:`JobStoppedError` (killed because the service stopped), :class:`JobCrashedError`
     (the process ended without an answer), the job's own :class:`~placer.errors.PlacerError`
     as :class:`ChildError` (same message and HTTP status), or :class:`ChildInternalError` (a bug)

A solve or a simulation is one long call into Python and native solver code; a thread running it
cannot be interrupted. Before this module a job that outlived its limit pinned a worker (a 20 s
solve ran 68 s; two simulations of a trace with one far-future request held both workers and later
solves stayed PENDING), and ``Service.stop`` waited for it, so SIGTERM did not stop the service.

:meth:`ChildJobs.run` computes in a child process and waits for its answer until the deadline; at
the deadline, or when :meth:`ChildJobs.stop` is called (the service stopping), the child is killed
with SIGKILL (a native solver need not heed SIGTERM) and its memory goes with it. The child only
computes and returns: the parent reads and writes the database (no connection crosses a fork).

The start method is ``forkserver``: children fork from one single-threaded server that imported
the planner once (:data:`PRELOAD`), so a job starts in milliseconds, not the 1-2 s of a fresh
interpreter, and never inherits the service's threads, sockets or database connections. A child
ignores SIGINT and SIGTERM (a Ctrl-C or a SIGTERM sent to the whole process group must not look
like a crash of the job: the parent decides) and exits by itself if its server goes away (the
service was killed). As with any non-fork start method, a child imports the parent's main module
(as ``__mp_main__``): a script that runs jobs keeps its work under ``if __name__ == "__main__"``
(``placer``'s entry point does).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
import traceback
from typing import Any, Callable

from placer.errors import PlacerError

log = logging.getLogger(__name__)

#: Modules the fork server imports once, so that every child starts with them loaded.
PRELOAD = ("placer.optimize", "placer.baselines", "placer.sim", "placer.service.jobs.work")
#: How long a killed child may take to be reaped before the parent stops waiting for it.
REAP_S = 5.0


class JobDeadlineError(PlacerError):
    """The job ran past its deadline and was killed."""

    exit_code = 4
    http_status = 504


class JobStoppedError(PlacerError):
    """The service stopped while the job ran (or before it started); the job was killed."""

    http_status = 503


class JobCrashedError(PlacerError):
    """The job's process ended without an answer (killed by the system, e.g. out of memory)."""

    http_status = 500


class ChildError(PlacerError):
    """A typed placer error raised in the child: its message, HTTP status and exit code."""

    def __init__(self, kind: str, message: str, http_status: int, exit_code: int):
        super().__init__(message)
        self.kind, self.http_status, self.exit_code = kind, http_status, exit_code


class ChildInternalError(Exception):
    """A bug in the job's code, raised in the child (its traceback was logged by the parent)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def internal_words(err: BaseException) -> str:
    """What a job records for a bug: ``internal error: <type>: <message>`` (the child's type)."""
    return f"internal error: {getattr(err, 'kind', type(err).__name__)}: {err}"


def _watch_server(server: int) -> None:
    """End this child when the fork server that made it is gone (the service was killed)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != server:
            os._exit(70)


def _child_main(writer: multiprocessing.connection.Connection, fn: Callable[..., Any], args: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_watch_server, args=(os.getppid(),), daemon=True).start()
    try:
        answer: tuple = ("ok", fn(*args))
    except PlacerError as err:
        answer = ("error", type(err).__name__, str(err), err.http_status, err.exit_code)
    except BaseException as err:  # a bug: the parent logs the traceback and records the job failed
        answer = ("internal", type(err).__name__, str(err), traceback.format_exc())
    try:
        writer.send(answer)
    except Exception as err:  # an answer that cannot be pickled is a bug too
        writer.send(("internal", type(err).__name__, f"the job's answer could not be sent: {err}",
                     traceback.format_exc()))
    writer.close()


class ChildJobs:
    """Runs jobs in child processes under deadlines; :meth:`stop` kills every one still running."""

    def __init__(self, method: str = "forkserver", preload: tuple[str, ...] = PRELOAD):
        self._context = multiprocessing.get_context(method)
        if method == "forkserver":
            self._context.set_forkserver_preload(list(preload))  # no effect once the server runs
        self._live: set = set()
        self._lock = threading.Lock()
        self._stopped: str | None = None

    def warm(self) -> None:
        """Start the fork server now (it imports :data:`PRELOAD` in the background), not at the first job."""
        if self._context.get_start_method() == "forkserver":
            from multiprocessing import forkserver

            forkserver.ensure_running()

    @property
    def running(self) -> int:
        """How many children are computing now."""
        with self._lock:
            return len(self._live)

    def run(self, fn: Callable[..., Any], *args: Any, deadline_s: float, what: str, why: str = "",
            hint: str = "shrink the scenario or give it a smaller time limit") -> Any:
        """``fn(*args)`` in a child process, killed after ``deadline_s`` seconds (``what`` names the job,
        ``why`` how its deadline was set and ``hint`` what to change, in the error)."""
        reader, writer = self._context.Pipe(duplex=False)
        proc = self._context.Process(target=_child_main, args=(writer, fn, args), daemon=True,
                                     name=f"placer-{what.split()[0]}")
        with self._lock:
            if self._stopped is not None:
                reader.close(), writer.close()
                raise JobStoppedError(f"{what}: {self._stopped} before it started")
            proc.start()
            self._live.add(proc)
        writer.close()  # the child holds the other end: EOF here once it is gone
        try:
            answer, late = self._wait(reader, proc, deadline_s)
            if late:
                raise JobDeadlineError(f"{what} was stopped at its deadline of {deadline_s:g} s"
                                       + (f" ({why})" if why else "") + f"; {hint}")
        finally:
            self._end(proc)
            reader.close()
        return self._unpack(answer, proc, what)

    @staticmethod
    def _wait(reader, proc, deadline_s: float) -> tuple[tuple | None, bool]:
        """The child's answer (None when it ended without one), and whether the deadline passed first."""
        end = time.monotonic() + deadline_s
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None, True
            ready = multiprocessing.connection.wait([reader, proc.sentinel], timeout=left)
            if reader in ready:
                try:
                    return reader.recv(), False
                except EOFError:  # gone without a word (killed)
                    return None, False
            if ready:
                return None, False

    def _end(self, proc) -> None:
        if proc.is_alive():
            proc.kill()
        proc.join(REAP_S)
        with self._lock:
            self._live.discard(proc)

    def _unpack(self, answer: tuple | None, proc, what: str) -> Any:
        if answer is None:
            if self._stopped is not None:
                raise JobStoppedError(f"{what}: {self._stopped} while it ran; submit it again")
            code = proc.exitcode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            raise JobCrashedError(f"{what}: its process ended without an answer ({how}"
                                  + ("; killed by the system, perhaps out of memory)" if code == -9 else ")"))
        if answer[0] == "ok":
            return answer[1]
        if answer[0] == "error":
            raise ChildError(*answer[1:])
        _, kind, message, trace = answer
        log.error("%s failed in its child process:\n%s", what, trace)
        raise ChildInternalError(kind, message)

    def stop(self, reason: str = "the service stopped") -> int:
        """Kill every running child (their jobs fail with :class:`JobStoppedError` naming ``reason``) and
        refuse new ones; returns how many were killed."""
        with self._lock:
            self._stopped = reason
            live = list(self._live)
        for proc in live:
            if proc.is_alive():
                proc.kill()
        return len(live)
