"""Solver settings: one object that a face builds once and the library passes down whole.

in:  what the user chose (objective, backend, time limit, marginals)
out: :class:`SolveConfig` (with an optional ``progress`` callback that gets :class:`Progress`), read by `optimize`, `evaluate_plan`, the baselines, the
     Dinkelbach loop, `--verify` and the sweeps instead of loose keyword arguments.

The time limit is a budget for the whole command, not for one MILP: the first library
entry point that solves (``optimize``, ``verify_plan``, ``evaluate_plan``) calls
:meth:`SolveConfig.started`, which fixes one ``deadline`` (a ``time.monotonic()``
instant); every MILP after it (Dinkelbach rounds, the final most-goodput solve, the
marginal-value re-solves, ``--verify`` re-solves) gets only :meth:`SolveConfig.left_s`.
A config already started keeps its deadline, so a face that starts it once bounds
everything it calls. Building a large MILP takes time too: :func:`building_within`
puts the deadline in scope and the builder's loops call :func:`check_build_deadline`,
so a build that outlives the budget ends in ``SolveTimeoutError`` (exit 4) at once; a loop
over flows (millions on a large full mesh) iterates them through :func:`checked`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from placer.errors import InputError, SolveTimeoutError

#: Objectives a user may ask for; the baselines also use "max-served" internally.
OBJECTIVES = ("bcr", "min-cost", "max-goodput")
#: The most seconds a time limit may ask for (a day): a longer one is a typo, not a plan.
MAX_TIME_LIMIT_S = 86_400.0


@dataclass(frozen=True)
class Progress:
    """Where a solve stands: its best plan's ratio (or objective), the proven bound, their gap, seconds so far."""

    phase: str  # "first plan", "local milp" (placer.ilp.local_first), "lp bound", "milp", "search" (a fleet beyond proof)
    incumbent: float | None  # best plan so far (bcr: SLA requests per USD), None before any
    bound: float | None  # proven ceiling on it (same unit), None when unknown
    gap: float  # (bound - incumbent) / incumbent; inf without both
    elapsed_s: float

    def line(self) -> str:
        """One line for a terminal: ``milp: plan 1021.1, bound 1088.9, gap 6.64 %, 12.3 s``."""
        plan = "no plan yet" if self.incumbent is None else f"plan {self.incumbent:.6g}"
        bound = "" if self.bound is None else f", bound {self.bound:.6g}"
        gap = "" if self.gap == float("inf") else f", gap {100 * self.gap:.2f} %"
        return f"{self.phase}: {plan}{bound}{gap}, {self.elapsed_s:.1f} s"


@dataclass(frozen=True)
class SolveConfig:
    """How to solve: what to optimise, with which MILP backend, in how long."""

    objective: str = "bcr"  # bcr | min-cost | max-goodput (max-served: baselines only)
    backend: str = "ortools"  # ortools (HiGHS) | ortools-highs | ortools-scip | pulp
    time_limit_s: float = 30.0
    marginals: bool = True  # re-solve to price each binding row (bcr only)
    deadline: float | None = None  # time.monotonic() when the budget ends; None: not started
    #: called with a :class:`Progress` after the LP bound, the first plan and each MILP (a face shows it)
    progress: Callable[[Progress], None] | None = dataclasses.field(default=None, compare=False, repr=False)

    def report(self, progress: Progress) -> None:
        """Hand ``progress`` to the caller's callback, if any (a failing callback never stops a solve)."""
        if self.progress is not None:
            try:
                self.progress(progress)
            except Exception:  # noqa: BLE001 - a display's error is not the plan's
                pass

    def check(self) -> SolveConfig:
        """Raise InputError naming the bad setting; return self."""
        if self.objective not in OBJECTIVES:
            raise InputError(f"objective: unknown {self.objective!r}; choose one of {', '.join(OBJECTIVES)}")
        if isinstance(self.time_limit_s, bool) or not (
                isinstance(self.time_limit_s, (int, float)) and 0 < self.time_limit_s <= MAX_TIME_LIMIT_S):
            raise InputError(f"time-limit must be a number of seconds in (0, {MAX_TIME_LIMIT_S:g}], "
                             f"got {self.time_limit_s}")
        return self

    def but(self, **changes) -> SolveConfig:
        """A copy with ``changes`` (e.g. ``config.but(objective="min-cost", marginals=False)``).

        A new ``time_limit_s`` on a started config is a sub-budget: its deadline becomes
        the earlier of the old one and now + the new limit."""
        out = dataclasses.replace(self, **changes)
        if "time_limit_s" in changes and self.deadline is not None and "deadline" not in changes:
            out = dataclasses.replace(out, deadline=min(self.deadline, time.monotonic() + out.time_limit_s))
        return out

    def started(self, spent_s: float = 0.0) -> SolveConfig:
        """This config with its deadline fixed (now + time_limit_s − ``spent_s``), unless already fixed."""
        if self.deadline is not None:
            return self
        return dataclasses.replace(self, deadline=time.monotonic() + self.time_limit_s - max(0.0, spent_s))

    def left_s(self) -> float:
        """Seconds left of the budget (the whole limit when not started; may be ≤ 0)."""
        if self.deadline is None:
            return self.time_limit_s
        return self.deadline - time.monotonic()

    def spent(self) -> bool:
        """Whether the budget is used up."""
        return self.left_s() <= 0.0


_BUILD_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("placer_build_deadline", default=None)


@contextmanager
def building_within(config: SolveConfig) -> Iterator[None]:
    """Within this block, :func:`check_build_deadline` enforces ``config``'s deadline (if started)."""
    token = _BUILD_DEADLINE.set(None if config.deadline is None else (config.deadline, config.time_limit_s))
    try:
        yield
    finally:
        _BUILD_DEADLINE.reset(token)


def check_build_deadline() -> None:
    """SolveTimeoutError when the deadline in scope (:func:`building_within`) has passed; else nothing."""
    scope = _BUILD_DEADLINE.get()
    if scope is not None and time.monotonic() > scope[0]:
        raise SolveTimeoutError(scope[1])


#: Items :func:`checked` lets pass between two deadline checks: at most a few tens of
#: milliseconds of work per item of the builder's loops (a flow's laws take ~11 µs).
CHECK_EVERY = 4096

T = TypeVar("T")


def checked(items: Iterable[T], every: int = CHECK_EVERY) -> Iterator[T]:
    """``items`` one by one, calling :func:`check_build_deadline` before the first and every
    ``every``-th after it: a loop or comprehension over millions of flows ends at the deadline too."""
    for i, item in enumerate(items):
        if i % every == 0:
            check_build_deadline()
        yield item
