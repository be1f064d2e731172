"""A wall-clock guard around one solve: a large model's solver runs in a forked child that is ended at the limit.

in:  a solve function, the :class:`~placer.ilp.model.LinearModel` and its time limit (seconds), the rest of
     the solve's arguments
out: :func:`within`: the function's :class:`~placer.ilp.backends.SolveResult`, or NO_SOLUTION when it has not
     answered by the limit plus :data:`GRACE_S` (the child is killed)

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


def _child(send, fn: Callable, model: LinearModel, time_limit_s: float, args: tuple) -> None:
    try:
        send.send(fn(model, *args[:1], time_limit_s, *args[1:]))
    except BaseException as err:  # noqa: BLE001 - any failure is the parent's to report as a Status
        send.send(err)
    finally:
        send.close()


def within(fn: Callable, model: LinearModel, backend: str, time_limit_s: float, *rest):
    """``fn(model, backend, time_limit_s, *rest)``, ended at ``time_limit_s`` (+ :data:`GRACE_S`) when the
    model is large: a NO_SOLUTION :class:`~placer.ilp.backends.SolveResult` then, as the solver's own limit
    would give."""
    from placer.ilp.backends import SolveResult, Status

    if (model.nonzeros() < GUARD_NONZEROS or "fork" not in multiprocessing.get_all_start_methods()
            or multiprocessing.current_process().daemon):  # a daemonic worker may not have children
        return fn(model, backend, time_limit_s, *rest)
    start = time.perf_counter()
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, model, time_limit_s, (backend, *rest)), daemon=True)
    proc.start()
    send.close()
    try:
        answer = recv.recv() if recv.poll(max(0.0, time_limit_s) + GRACE_S) else None
    except EOFError:  # the child died without an answer (killed for memory, a solver crash)
        answer = None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        recv.close()
    if isinstance(answer, BaseException):
        raise answer
    if answer is None:
        return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, time.perf_counter() - start,
                           f"{backend} (ended at the time limit)")
    return answer
