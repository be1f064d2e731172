"""Typed errors that reach users as clear messages (CLI exit codes, HTTP 4xx).

Exit codes follow docs/contracts.md: 2 bad input, 3 infeasible, 4 no feasible plan
within the time limit, 1 anything else.
"""

from __future__ import annotations


class PlacerError(Exception):
    """Base of every error placer raises on purpose."""

    exit_code = 1
    http_status = 500


class InputError(PlacerError, ValueError):
    """The user's input is wrong; the message names the field and the value."""

    exit_code = 2
    http_status = 422


class UnknownChipError(InputError):
    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        super().__init__(f"unknown chip {name!r}; known chips: {', '.join(known)}")


class UnknownModelError(InputError):
    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        super().__init__(f"unknown model {name!r}; known models: {', '.join(known)}")


class InfeasiblePlanError(PlacerError):
    """No plan meets the constraints; ``reason`` names what binds."""

    exit_code = 3
    http_status = 422

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"infeasible: {reason}")


class SolveTimeoutError(PlacerError):
    """The solver found no feasible plan within the time limit."""

    exit_code = 4
    http_status = 422

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(
            f"no feasible plan found within the time limit of {seconds:g} s; "
            "raise --time-limit or shrink the scenario (fewer tp_degrees or chips)"
        )


class SolverError(PlacerError):
    """The MILP solver stopped abnormally (not infeasible, not out of time); names the backend and status."""

    exit_code = 1
    http_status = 500

    def __init__(self, backend: str, status: str, seconds: float, hint: str = ""):
        self.backend, self.status, self.seconds = backend, status, seconds
        super().__init__(
            f"solver {backend} stopped abnormally ({status}) after {seconds:.1f} s"
            + (f": {hint}" if hint else "; try --solver ortools-scip, or check the scenario for extreme numbers"))
