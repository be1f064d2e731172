"""A plan by variable name, written per flow, onto a model whose relayed flows may be split at RLD.

in:  a :class:`~placer.ilp.formulation.Formulation` and a plan's values by variable name, where a relayed
     (P-RLD-MD) flow may be given by its own column's name ``x[class,P-RLD-MD,queue,dst]``
out: :func:`on_columns`: the plan by the names of ``form``'s columns; :func:`per_flow`: a solution of a model
     by names that fit any model of the same pools (its relayed flows per line)

Why: whether a relayed class's flows from a queue get one column per line or the split r[k,p] + y[k,s→d]
(:mod:`placer.ilp.columns`) depends on the lines the queue's datacenter has — a region's model
(:mod:`placer.ilp.regions`) has fewer than the whole model, so the same flow may be split in one and not in
the other. Per flow, a plan fits both: a split column is the sum of its flows (the reformulation's exact map).
"""

from __future__ import annotations

from collections import defaultdict

from placer.ilp.formulation import Formulation
from placer.ilp.sets import Flow
from placer.pdd import P_RLD_MD


def flow_name(form: Formulation, flow: Flow) -> str:
    """The name of ``flow``'s own column (as :func:`placer.ilp.columns.add_columns` names it)."""
    return f"x[{form.problem.classes[flow.k].name},{flow.pipeline},{flow.p.label},{flow.dst}]"


def per_flow(form: Formulation, values: list[float]) -> dict[str, float]:
    """``values`` (a solution of ``form``) by name, non-zero only, the relayed flows split at RLD given per
    flow (:meth:`placer.ilp.columns.Columns.rates`) in place of their r and y columns."""
    split = set(form.columns.relay_in.values()) | set(form.columns.relay_out.values())
    out = {v.name: x for v, x in zip(form.model.vars, values) if x != 0.0 and v.index not in split}
    for flow, rate in form.columns.rates(values).items():
        if rate != 0.0 and flow not in form.columns.x:
            out[flow_name(form, flow)] = rate
    return out


def on_columns(form: Formulation, plan: dict[str, float]) -> dict[str, float]:
    """``plan`` with the relayed flows it gives per flow added onto ``form``'s split columns where ``form``
    splits them (r[k,p]: the queue's flows summed over lines; y[k,s→d]: the split queues' flows to d summed);
    names ``form`` has are kept as given. A plan of ``form`` itself comes back unchanged."""
    out = dict(plan)
    if not form.columns.relay_in:
        return out
    names = {v.index: v.name for v in form.model.vars}
    lines = defaultdict(list)
    for (k, s, d), i in form.columns.relay_out.items():
        lines[(k, s)].append((d, i))
    for (k, p), i in form.columns.relay_in.items():
        for d, y in lines[(k, p.dc)]:
            rate = plan.get(flow_name(form, Flow(k, P_RLD_MD, p, d)), 0.0)
            if rate:
                out[names[i]] = out.get(names[i], 0.0) + rate
                out[names[y]] = out.get(names[y], 0.0) + rate
    return out
