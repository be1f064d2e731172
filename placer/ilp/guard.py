"""A wall-clock guard around one solve: a large model's solver runs in a forked child that is ended at the limit.

in:  a solve function, the :class:`~placer.ilp.model.LinearModel` and its time limit (seconds), the rest of
     the solve's arguments
out: :func:`within`: the function's :class:`~placer.ilp.backends.SolveResult`, or NO_SOLUTION when it has not
     answered by the limit plus :data:`GRACE_S` (the child is killed); :class:`Beside`: a function run in a forked
     child beside the caller's own work, what it reports read as it comes (:func:`can_fork`: whether it can be)

Why: HiGHS checks its time limit only at points of its own choosing, and neither pywraplp's HiGHS
(``InterruptSolve`` is unsupported) nor MathOpt's (its interrupter did not stop an interior-point LP: 29.3 s
interrupted at 0.5 s, on 32 sites × 12 classes) can stop it from outside; on 100 sites × 12 classes the
hand-over to pywraplp alone (1.5 M coefficients, one call each) took seconds past the check. A process can
be ended: the child is forked (it shares the built model copy-on-write, nothing is pickled but the result)
and the parent waits for its answer at most until the limit. Small models (under :data:`GUARD_NONZEROS`
coefficients) solve in this process: their limits hold, and a fork per Dinkelbach round would cost more
than it saves. Where fork is not available, or in a daemonic worker process, the solve runs unguarded.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable

from placer.ilp.model import LinearModel

#: Models with at least this many non-zeros are solved in a guarded child (sixteen-dc: ~0.1 M; 100 sites ×
#: 12 classes: 1.5 M).
GUARD_NONZEROS = 400_000
#: Seconds past the limit the child may take to hand its answer back (its values for ~300 000 columns).
GRACE_S = 2.0


def can_fork() -> bool:
    """Whether a solve can run in a forked child here (not where fork is missing, nor in a daemonic worker)."""
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def within(fn: Callable, model: LinearModel, backend: str, time_limit_s: float, *rest):
    """``fn(model, backend, time_limit_s, *rest)``, ended at ``time_limit_s`` (+ :data:`GRACE_S`) when the
    model is large: a NO_SOLUTION :class:`~placer.ilp.backends.SolveResult` then, as the solver's own limit
    would give. It runs as a :class:`Beside` child that reports its one answer; an error it raised is
    raised here."""
    from placer.ilp.backends import SolveResult, Status

    if model.nonzeros() < GUARD_NONZEROS or not can_fork():  # a daemonic worker may not have children
        return fn(model, backend, time_limit_s, *rest)
    start = time.perf_counter()
    child = Beside(_answer, fn, model, backend, time_limit_s, rest)
    answers = child.finish(max(0.0, time_limit_s) + GRACE_S)
    if child.error is not None:
        raise child.error
    if not answers:  # not answered in time, or the child died without a word (killed for memory, a crash)
        return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, time.perf_counter() - start,
                           f"{backend} (ended at the time limit)")
    return answers[0]


def _answer(report: Callable, fn: Callable, model: LinearModel, backend: str, time_limit_s: float,
            rest: tuple) -> None:
    report(fn(model, backend, time_limit_s, *rest))


#: what a :class:`Beside` child sends once its function has returned (or raised: :data:`_ERROR` first)
_DONE = "done"
_ERROR = "error"


def _reporting_child(send, fn: Callable, args: tuple) -> None:
    try:
        fn(lambda value: send.send(("value", value)), *args)
    except BaseException as err:  # noqa: BLE001 - what it reported before stands; the error is the parent's to see
        send.send((_ERROR, err))
    finally:
        send.send((_DONE, None))
        send.close()


class Beside:
    """``fn(report, *args)`` in a forked child (sharing the built model copy-on-write) while this process goes on: each
    ``report(value)`` it makes is read by :meth:`poll` (without waiting) and :meth:`finish` (waiting at most a given
    time, then ending the child). Its own solves run unguarded in it (a daemonic process), so their limits are
    HiGHS's own; :meth:`finish` ends it all the same. An exception ``fn`` raises ends its reports and is kept in
    ``error`` (what it reported before stands). Only where :func:`can_fork`."""

    def __init__(self, fn: Callable, *args) -> None:
        ctx = multiprocessing.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_reporting_child, args=(send, fn, args), daemon=True)
        self._proc.start()
        send.close()
        self.values: list = []
        self.error: BaseException | None = None
        self.done = False

    def _take(self, wait_s: float) -> bool:
        """Read one message if one comes within ``wait_s``; False when none did or the child is done."""
        if self.done or not self._recv.poll(max(0.0, wait_s)):
            return False
        try:
            kind, value = self._recv.recv()
        except EOFError:  # the child died without a word (killed for memory, a solver crash)
            kind, value = _DONE, None
        if kind == _DONE:
            self.done = True
            return False
        if kind == _ERROR:
            self.error = value
        else:
            self.values.append(value)
        return True

    def poll(self) -> list:
        """Every value reported so far (the new ones read without waiting)."""
        while self._take(0.0):
            pass
        return self.values

    def finish(self, wait_s: float) -> list:
        """Every value reported, waiting at most ``wait_s`` seconds for the child to end; then it is ended."""
        deadline = time.monotonic() + wait_s
        while not self.done:
            if not self._take(deadline - time.monotonic()) and time.monotonic() >= deadline:
                break
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join()
        self._recv.close()
        return self.values
