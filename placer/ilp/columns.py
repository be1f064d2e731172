"""The MILP's traffic columns: one per flow, except relayed flows, which are split at RLD.

in:  the :class:`~placer.ilp.data.Prepared` data and the P queues whose (C4) memory row is implied
out: :class:`Columns`: the column each flow puts on its P queue's rows, the columns each route
     puts on its line's rows, and the flow rates of a solution

A relayed (P-RLD-MD) request streams its first token from RLD in its own datacenter, so its
lateness (and goodput) does not depend on the line its KV crosses afterwards; on the P side it
weighs its prefill on (C3) and, through hold[f], the line on (C4) only. Where a P queue's (C4) is
implied by its (C3) for every line (:func:`implied`), a relayed class-k request from queue p
touches rows of p that do not depend on the line, and rows of the line that do not depend on p.
Where such a request has more than one line to choose from, its flows get two columns instead of
one per line:

* r[k,p] ≥ 0: class-k requests queue p relays (demand, mix, P capacity, SLA, goodput);
* y[k,s→d] ≥ 0: class-k requests relayed from datacenter s over the line to d (RLD split, MD
  split, link: the formulation adds y to those rows beside the flows' own columns), shared by
  every such queue of s;
* (C17) relay balance: Σ_p r[k,p] = Σ_d y[k,s→d] for each class k and datacenter s.

The reformulation is exact: any x of the per-line model gives r and y by summing, and any r, y
give a per-line x by splitting each r[k,p] over the lines in y's proportions
(:meth:`Columns.rates`), which keeps every row. It may route queue p to a line whose flow
``prepare`` dropped as dominated (its P-MD twin is as good and needs no RLD): still a valid
plan, never a better one. On sixteen-dc it removes ~9 600 of 41 000 columns (each relayed
class and queue had one per line out of its datacenter); with the implied memory rows left out
too (:mod:`placer.ilp.formulation`) the proving MILP took ~31 s where it took 51-84 s.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from placer.pdd import P, P_RLD_MD
from placer.ilp.config import checked
from placer.ilp.data import Flow, Pool, Prepared
from placer.ilp.model import LinearModel
from placer.problem import Problem

TOL = 1e-12  # relative: lateness "the same on every line", a coefficient "no larger"


def implied(load: dict, limit: float, by: dict, by_limit: float) -> bool:
    """Whether the row Σ load·x ≤ limit·c follows from Σ by·x ≤ by_limit·c for x, c ≥ 0: each
    column weighs no more on it, relative to its limit (then the row never binds first)."""
    return all(a * by_limit <= by.get(i, 0.0) * limit * (1 + TOL) for i, a in load.items())


@dataclass
class Columns:
    """Which variable carries each flow: ``x`` a flow's own column; ``relay_in`` r[k,p] and
    ``relay_out`` y[k,s,d] for the relayed flows split at RLD (module docstring)."""

    x: dict[Flow, int] = field(default_factory=dict)
    relay_in: dict[tuple[int, Pool], int] = field(default_factory=dict)
    relay_out: dict[tuple[int, str, str], int] = field(default_factory=dict)

    def p_side(self, f: Flow) -> int:
        """The column ``f`` puts on its P queue's rows, the demand, mix and SLA rows and the goodput."""
        i = self.x.get(f)
        return self.relay_in[(f.k, f.p)] if i is None else i

    def rates(self, values: list[float]) -> dict[Flow, float]:
        """req/s on each flow of a solution; a relayed queue's r split over its datacenter's lines in
        y's proportions (the flows named may include a dominated one ``prepare`` dropped)."""
        rates = {f: values[i] for f, i in self.x.items()}
        out: dict[tuple[int, str], list[tuple[str, float]]] = defaultdict(list)
        for (k, s, d), i in self.relay_out.items():
            out[(k, s)].append((d, values[i]))
        for (k, p), i in self.relay_in.items():
            lines = out[(k, p.dc)]
            total = sum(v for _, v in lines)
            if values[i] <= 0 or total <= 0:
                continue
            for d, v in lines:
                if v > 0:
                    rates[Flow(k, P_RLD_MD, p, d)] = values[i] * v / total
        return rates

    def routes(self) -> dict[tuple[int, str, str, str], list[int]]:
        """(class, pipeline, src, dst) -> the route-side columns that carry it."""
        out: dict[tuple[int, str, str, str], list[int]] = defaultdict(list)
        for f, i in self.x.items():
            out[(f.k, f.pipeline, f.src, f.dst)].append(i)
        for (k, s, d), i in self.relay_out.items():
            out[(k, P_RLD_MD, s, d)].append(i)
        return out


def _split_at_rld(data: Prepared, memory_implied: dict[Pool, dict[int, bool]]) -> tuple[set, dict]:
    """The (k, p) whose relayed flows are split at RLD, and each (k, s)'s lines: more than one line
    to choose from (with one, a column per line is the smaller model), the same lateness on every
    line, and p's (C4) implied for each line of s (``memory_implied[p][k]``)."""
    lines: dict[tuple[int, str], set[str]] = defaultdict(set)
    late: dict[tuple[int, Pool], set[float]] = defaultdict(set)
    for f in checked(data.flows):
        if f.pipeline == P_RLD_MD:
            lines[(f.k, f.src)].add(f.dst)
            late[(f.k, f.p)].add(data.late[f])
    split = {(k, p) for (k, p), lates in late.items()
             if p.role == P and len(lines[(k, p.dc)]) > 1 and memory_implied.get(p, {}).get(k, False)
             and max(lates) - min(lates) <= TOL * max(1.0, max(lates))}
    return split, {key: sorted(ds) for key, ds in lines.items()}


def add_columns(m: LinearModel, problem: Problem, data: Prepared,
                memory_implied: dict[Pool, dict[int, bool]]) -> Columns:
    """The traffic variables, and (C17) relay balance for the flows split at RLD."""
    split, lines = _split_at_rld(data, memory_implied)
    cols = Columns()
    names = [c.name for c in problem.classes]
    for f in checked(data.flows):
        if f.pipeline == P_RLD_MD and (f.k, f.p) in split:
            if (f.k, f.p) not in cols.relay_in:
                cols.relay_in[(f.k, f.p)] = m.var(f"x[{names[f.k]},{P_RLD_MD},{f.p.label},*]")
        else:
            cols.x[f] = m.var(f"x[{names[f.k]},{f.pipeline},{f.p.label},{f.dst}]")
    queues: dict[tuple[int, str], list[int]] = defaultdict(list)
    for (k, p), i in cols.relay_in.items():
        queues[(k, p.dc)].append(i)
    for (k, s), rs in sorted(queues.items(), key=lambda kv: kv[0]):
        ys = {}
        for d in lines[(k, s)]:
            ys[d] = cols.relay_out[(k, s, d)] = m.var(f"y[{names[k]},{s}->{d}]")
        m.add(f"relay[{names[k]},{s}]", "relay", {**{r: 1.0 for r in rs}, **{y: -1.0 for y in ys.values()}},
              "==", 0.0)
    return cols


def relay_lines(data: Prepared) -> dict[tuple[int, str], list[str]]:
    """(k, s) -> the lines a relayed class-k request from s may take (as :func:`add_columns` uses)."""
    return _split_at_rld(data, {})[1]
