"""The MILP's decode rows: (C5) the decode split onto MD, D and RLD pools, (C6) decode slots and the step
row, (C7) decode memory (the formulation's docstring, :mod:`placer.ilp.formulation`, states each row).

in:  the model being built (:class:`~placer.ilp.model.LinearModel`), the problem, its prepared data
     (:class:`~placer.ilp.data.Prepared`: decode designs, routes, eager tokens), the flows' columns and the
     pools' integer counts n
out: :func:`add_decode` adds the rows and returns the :class:`DecodeLoad` (the z variables per class, pipeline,
     destination and pool), which extraction reads
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.decode_slots import StepRow
from placer.flows import eager_tokens, relay_room_factor
from placer.ilp.columns import Columns, implied
from placer.ilp.config import check_build_deadline
from placer.ilp.data import DecodeDesign, Pool, Prepared
from placer.ilp.model import LinearModel
from placer.pdd import D, MD, P_D, P_MD, P_RLD, P_RLD_MD, RLD
from placer.problem import Problem

GB = 1e9  # memory rows are written in GB to keep coefficients well scaled


def add_decode(m: LinearModel, problem: Problem, data: Prepared, cols: Columns, n: dict) -> DecodeLoad:
    """(C5)-(C7) for every class and decode pool: each pool's step row at the mix (one per chip and tp,
    the same in every datacenter and role), the splits, then each pool's slot, step and memory rows."""
    rows: dict[tuple, StepRow] = {}
    for q, design in data.decode.items():
        if (q.chip, q.tp) not in rows:
            rows[q.chip, q.tp] = StepRow.at_mix(design.im, design.context_tokens, problem.tpot_s,
                                                problem.options.utilization_cap, design.step_s)
    load = DecodeLoad({}, {q: {} for q in data.decode}, {q: rows[q.chip, q.tp] for q in data.decode},
                      {q: {} for q in data.decode}, {q: {} for q in data.decode})
    for k in range(len(problem.classes)):
        _split_direct(m, problem, data, cols, load, k)
        _split_relay(m, problem, data, cols, load, k)
    for q, design in data.decode.items():
        check_build_deadline()
        _add_decode_slots(m, problem, load, n, q, design)
        _add_decode_memory(m, problem, load, n, q, design)
    return load


@dataclass
class DecodeLoad:
    """What (C5) hands to (C6) and (C7): the z variables and each decode pool's coefficients."""

    z: dict[tuple, int]
    slots: dict[Pool, dict[int, float]]  # busy seconds per request, per z var
    rows: dict[Pool, StepRow]  # each pool's step row (C6): the mix's TPOT batch B_t and the weights w_k
    steps: dict[Pool, dict[int, float]]  # the share of an instance one req/s takes on the step row, per z var
    memory: dict[Pool, dict[int, float]]  # busy seconds × resident KV (GB), per z var


def _split_direct(m: LinearModel, problem: Problem, data: Prepared, cols: Columns, load: DecodeLoad, k: int) -> None:
    """(C5) decode split on MD and D: Σ_{q MD in d} z[k,q] = Σ_{f→d, MD pipelines} x_f for every d."""
    c, kv = problem.classes[k], problem.kv_bytes_per_token
    for d in problem.dc_names:
        check_build_deadline()
        for role, pipes in ((MD, (P_MD, P_RLD_MD)), (D, (P_D,))):
            feeding = [f for pipe in pipes for f in data.by_route[(k, pipe, d)]]
            targets = [q for q in data.decode if q.role == role and q.dc == d]
            if not feeding or not targets:
                continue
            coeffs = {**{cols.x[f]: 1.0 for f in feeding if f in cols.x},
                      **{y: 1.0 for (j, _, to), y in cols.relay_out.items() if j == k and to == d and role == MD}}
            for q in targets:
                var = load.z[(k, None, d, q)] = m.var(f"z[{c.name},{q.label}]")
                coeffs[var] = -1.0
                busy = c.output_tokens * data.decode[q].step_s
                load.slots[q][var] = busy
                load.steps[q][var] = load.rows[q].share(c, c.output_tokens * load.rows[q].limit_s)
                load.memory[q][var] = busy * data.decode[q].kv_weight(c) * kv / GB
            m.add(f"split[{c.name},{role},{d}]", "split", coeffs, "==", 0.0)


def _split_relay(m: LinearModel, problem: Problem, data: Prepared, cols: Columns, load: DecodeLoad, k: int) -> None:
    """(C5) decode split on RLD: Σ_{q RLD in dc(p)} z[k,pipe,d,q] = Σ_{f: RLD pipelines} x_f, keyed by
    the P datacenter, pipeline and destination (eager tokens depend on the line)."""
    c, kv = problem.classes[k], problem.kv_bytes_per_token
    for src in problem.dc_names:
        check_build_deadline()
        targets = [q for q in data.decode if q.role == RLD and q.dc == src]
        for pipe in (P_RLD_MD, P_RLD):
            for d in problem.dc_names:
                feeding = [f for f in data.by_route[(k, pipe, d)] if f.src == src]
                if not feeding or not targets:
                    continue
                relay_s = data.eager[feeding[0]]
                # (C7) RLD's KV room for the bunching of the line's transfers, not just their mean
                room = relay_room_factor(problem.options.link_utilization_cap) if pipe == P_RLD_MD else 1.0
                coeffs = {cols.x[f]: 1.0 for f in feeding if f in cols.x}
                if pipe == P_RLD_MD and (k, src, d) in cols.relay_out:
                    coeffs[cols.relay_out[(k, src, d)]] = 1.0
                for q in targets:
                    var = load.z[(k, pipe, d, q)] = m.var(f"z[{c.name},{pipe},{d},{q.label}]")
                    coeffs[var] = -1.0
                    tokens = eager_tokens(relay_s, c.output_tokens, data.decode[q].step_s)
                    busy = tokens * data.decode[q].step_s
                    load.slots[q][var] = busy
                    row = load.rows[q]  # a relayed request is held for its line, a filtered one decodes here
                    load.steps[q][var] = (row.share(c, busy, tokens) if pipe == P_RLD_MD
                                          else row.share(c, c.output_tokens * row.limit_s))
                    load.memory[q][var] = room * busy * data.decode[q].kv_weight(c) * kv / GB
                m.add(f"split[{c.name},{pipe},{src}->{d}]", "split", coeffs, "==", 0.0)


def _add_decode_slots(m: LinearModel, problem: Problem, load: DecodeLoad, n: dict, q: Pool,
                      design: DecodeDesign) -> None:
    """(C6) decode slots: Σ z · tokens · t_q ≤ κ_q · u · B_q · n_q, and the step row
    Σ z · held · c_k / (s_max − a) ≤ κ_q · n_q (:class:`placer.decode_slots.StepRow`) where the count row
    does not imply it (:func:`placer.ilp.columns.implied`: some class weighs more on it)."""
    kappa = problem.pool_capacity.get(q.key, 1.0)
    slots = problem.options.utilization_cap * design.batch * kappa
    m.add(f"decode_slots[{q.label}]", "decode_slots", {**load.slots[q], n[q.key]: -slots}, "<=", 0.0)
    if not implied(load.steps[q], kappa, load.slots[q], slots):
        m.add(f"decode_steps[{q.label}]", "decode_slots", {**load.steps[q], n[q.key]: -kappa}, "<=", 0.0)


def _add_decode_memory(m: LinearModel, problem: Problem, load: DecodeLoad, n: dict, q: Pool,
                       design: DecodeDesign) -> None:
    """(C7) decode memory: Σ z · tokens · t_q · w_k · kv ≤ κ_q · (K_q − z·s_q/2) · kv · n_q (Little's law on the
    reserved KV, with the occupancy headroom), in GB; left out where (C6) implies it (no request's weight
    over the limit / (u·B_q): the design batch fits)."""
    capacity = design.kv_limit_tokens * problem.kv_bytes_per_token / GB * problem.pool_capacity.get(q.key, 1.0)
    slots = problem.options.utilization_cap * design.batch * problem.pool_capacity.get(q.key, 1.0)
    if implied(load.memory[q], capacity, load.slots[q], slots):
        return
    m.add(f"decode_memory[{q.label}]", "decode_memory", {**load.memory[q], n[q.key]: -capacity}, "<=", 0.0)
