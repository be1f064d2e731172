"""Each pool's load at a plan's rates, for "why this plan" (:mod:`placer.report.why`).

in:  a :class:`~placer.problem.Problem` and a :class:`~placer.plan.Plan` with ``assignments``
out: :class:`PoolUsage` per pool with instances: its utilisation (P: its busiest queue's busy
     fraction; decode: batch over design batch) and KV memory per instance, read from
     :func:`placer.evaluate.analyze` at the plan's actual utilisations.
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.evaluate import analyze
from placer.flows import decode_design, instance
from placer.pdd import P
from placer.plan import Plan, PoolKey
from placer.problem import Problem


@dataclass
class PoolUsage:
    """One pool's load at the plan's rates: ``utilization`` is P's busy fraction (its
    busiest queue) or a decode pool's batch over its design batch (TPOT and memory);
    KV memory is per instance (a P pool holds one prompt's KV at a time per forward)."""

    role: str
    datacenter: str
    chip: str
    tp: int
    count: int
    utilization: float
    kv_gib_used: float
    kv_gib_capacity: float

    @property
    def key(self) -> PoolKey:
        """The pool this row is about: (role, datacenter, chip, tp)."""
        return PoolKey(self.role, self.datacenter, self.chip, self.tp)


def pool_usage(problem: Problem, plan: Plan) -> list[PoolUsage]:
    """Utilisation and KV memory of every pool with instances (needs the plan's assignments)."""
    analysis = analyze(problem, plan)
    classes = {c.name: c for c in problem.classes}
    gib = 2.0 ** 30
    out = []
    for pool in plan.pools:
        key = pool.key
        if pool.count <= 0:
            continue
        im = instance(problem, pool.chip, pool.tp)
        if pool.role == P:
            util = max((rho for k, rho in analysis.p_utilization.items() if k[:4] == key), default=0.0)
            longest = max((classes[a.request_class].input_tokens for a in plan.assignments
                           if a.key == key and a.rps > 0), default=0)
            kv_used = longest * problem.kv_bytes_per_token
        else:
            st = analysis.decode.get(key)
            busy = st is not None and st.busy
            design = decode_design(problem, im)[0] if busy else 0
            util = st.batch / design if busy and design > 0 else 0.0
            ctx = (st.context_weighted + st.held_context) / (st.tokens_per_s + st.held) if busy else 0.0
            kv_used = (st.batch * ctx * problem.kv_bytes_per_token) if busy else 0.0
        out.append(PoolUsage(pool.role, pool.datacenter, pool.chip, pool.tp, pool.count, util,
                             kv_used / gib, max(im.kv_capacity_bytes, 0.0) / gib))
    return out
