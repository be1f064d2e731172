"""A solver-neutral mixed-integer linear model.

in:  variables, rows and an objective added by the formulation
out: a :class:`LinearModel` that any backend (OR-Tools, PuLP) can solve, so both
     backends solve exactly the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

Expr = dict[int, float]  # variable index -> coefficient


@dataclass(frozen=True)
class Var:
    index: int
    name: str
    lb: float
    ub: float
    integer: bool


@dataclass(frozen=True)
class Row:
    name: str
    family: str  # constraint family, e.g. "link", "p_capacity"; used to report what binds
    coeffs: Expr
    sense: str  # "<=", ">=", "=="
    rhs: float

    def activity(self, values: list[float]) -> float:
        return sum(c * values[i] for i, c in self.coeffs.items())

    def slack(self, values: list[float]) -> float:
        """How far from binding (>= 0 when satisfied; 0 when tight)."""
        a = self.activity(values)
        if self.sense == "<=":
            return self.rhs - a
        if self.sense == ">=":
            return a - self.rhs
        return -abs(a - self.rhs)


@dataclass
class LinearModel:
    vars: list[Var] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    objective: Expr = field(default_factory=dict)
    maximize: bool = True
    _by_name: dict[str, int] = field(default_factory=dict)

    def var(self, name: str, lb: float = 0.0, ub: float = math.inf, integer: bool = False) -> int:
        if name in self._by_name:
            raise ValueError(f"duplicate variable {name!r}")
        index = len(self.vars)
        self.vars.append(Var(index, name, lb, ub, integer))
        self._by_name[name] = index
        return index

    def index(self, name: str) -> int:
        return self._by_name[name]

    def add(self, name: str, family: str, coeffs: Expr, sense: str, rhs: float) -> None:
        coeffs = {i: c for i, c in coeffs.items() if c != 0.0}
        if sense not in ("<=", ">=", "=="):
            raise ValueError(f"bad sense {sense!r}")
        self.rows.append(Row(name, family, coeffs, sense, float(rhs)))

    def fix(self, index: int, value: float) -> None:
        v = self.vars[index]
        self.vars[index] = Var(v.index, v.name, value, value, v.integer)

    def set_bounds(self, index: int, lb: float, ub: float) -> None:
        v = self.vars[index]
        self.vars[index] = Var(v.index, v.name, lb, ub, v.integer)

    def relaxed(self) -> LinearModel:
        """The same model with every integer variable made continuous."""
        copy = LinearModel(
            vars=[Var(v.index, v.name, v.lb, v.ub, False) for v in self.vars],
            rows=list(self.rows),
            objective=dict(self.objective),
            maximize=self.maximize,
            _by_name=dict(self._by_name),
        )
        return copy

    def integer_columns(self) -> int:
        """How many columns are integer (the size the solve's switches are set by)."""
        return sum(v.integer for v in self.vars)

    def nonzeros(self, extra: Iterable[Row] = ()) -> int:
        """The coefficients of its rows, and of ``extra`` rows (e.g. rows kept aside to add later)."""
        return sum(len(row.coeffs) for row in (*self.rows, *extra))

    def objective_value(self, values: list[float]) -> float:
        return sum(c * values[i] for i, c in self.objective.items())

    def violations(self, values: list[float], tol: float = 1e-6) -> list[str]:
        """Rows and bounds the given values break (scaled tolerance)."""
        bad = []
        for v in self.vars:
            x = values[v.index]
            if x < v.lb - tol or x > v.ub + tol:
                bad.append(f"{v.name}={x:g} outside [{v.lb:g}, {v.ub:g}]")
            if v.integer and abs(x - round(x)) > 1e-6:
                bad.append(f"{v.name}={x:g} is not integral")
        for row in self.rows:
            scale = max(1.0, abs(row.rhs), max((abs(c) for c in row.coeffs.values()), default=1.0))
            if row.slack(values) < -tol * scale:
                bad.append(f"{row.name}: {row.activity(values):g} {row.sense} {row.rhs:g}")
        return bad
