r"""The PDD placement MILP.

Sets
----
* K: request classes k (share s_k, input I_k, output O_k, hit rate h_k).
* D: datacenters; L ⊆ D×D: directed WAN lines (both directions of each link).
* Q: candidate pools q = (role, dc, chip, tp), role ∈ {P, RLD, MD, A} (PDD; A when
  ``options.aggregated`` is on) or {P, D} (PD baselines) or {A} (the agg
  baseline); a candidate exists when the dc has ≥ tp chips of that kind, the
  weights plus one full context fit in tp chips, and (decode roles) a batch of one
  meets the TPOT SLA. Each P pool is split into queues t = (utilisation tier u_t,
  admitted classes ∈ {mix, light, set}): a busier queue is cheaper per request but waits
  longer; a "mix" queue takes every class in the scenario's proportions, a "light" one
  (at the cap u only) just the classes whose prefill is at most 25 % of the TTFT budget,
  in any mix, so short prefills can be kept from waiting behind long ones. "Set" queues take a subset of the
  classes, in proportion among themselves (C13), priced at its exact moments, on whole instances (a set's tiers
  on a pool sum to an integer, ``p_cuts.add_whole_sets``: an instance a set queue shared would be one FCFS line,
  :func:`placer.p_queues.queue_layout`, which their laws do not see; their labels put the kind first, so the
  layout lays them first): where a pool's heavy classes (K_H, not light) can be on time at the cap, K_H's and
  K \ K_H's at the cap take the light queue's place; and at each tail cut θ of the classes' uncached lengths
  (those above it late everywhere), the classes below θ and those at or above it, at u·{1, .7, .45}
  (:mod:`placer.ilp.p_cuts`: a threshold plan there, PrfaaS's, is then a plan). The heavy/light split only where at most
  ``p_tiers.SPLIT_MAX_POOLS`` pools would take it (on eight-dc's 54 the proof ran 4-7x longer), the cuts only
  within ``p_tiers.SET_COLUMNS_MAX`` set-queue columns (a plan note says what is left out). Where
  the architecture restricts a datacenter's P pools to a subset K_d of the classes (``Architecture.p_admits``:
  PrfaaS's threshold, the long classes remote and the rest local) its queues are "set" queues
  instead: K_d in proportion among themselves (C13), tiers from K_d's law, no light queue.
  The mix tiers of a pool are generated from the SLA and the pool's service-time law
  (:func:`placer.ilp.p_tiers.tier_utilizations`): u·{1, .7, .45} (for flows slower than
  the fastest, e.g. a WAN move before the first token), and below 0.45·u the
  utilisations where the pool's late share (each class at its fastest TTFT without
  queueing, M/G/1 tail) rises 2, 6 and 15 points above its zero-load floor; tiers
  within 8 % merge.
  Why a generated grid rather than utilisation as a variable: lateness is a nonlinear
  (exponential-tail) function of ρ, and mixing tiers (C0) already gives the MILP any
  utilisation between two of them — the chord between grid points, which overstates
  lateness (ρ·e^{aρ} is convex in ρ), so the MILP errs on the safe side. A grid placed
  by lateness puts points where the curve bends (a pool whose prefill nearly fills the
  SLA gets tiers down to a few per cent, a fast pool just the fixed three), so
  the model stays near the size of the old fixed u·{1, .7, .45} alone (which could
  never run a pool below 0.45·u, so a prefill near the SLA looked infeasible at any
  load) while reaching any load the tail needs. A piecewise-linear lateness row would
  need per-flow breakpoints (lateness depends on each flow's TTFT): many more rows.
* Aggregated pools A (:mod:`placer.aggregated`): one instance prefills and decodes, a
  prompt chunk of C tokens riding in each decode step. Each A pool is split into queues
  t = (chunk C ∈ placer.aggregated.chunk_choices, tier u_t, mix|light) like a P pool: the
  "mix" tiers u·{1, .7, .45}, a "light" queue at u. Design per chunk: B_a the largest
  batch whose mixed step t_a = t(B, C) meets TPOT (every step taken to carry a full
  chunk: the chunk's TPOT interference); prefill budget C/t_a tokens/s per instance.
* F: flows f = (k, pipeline, P or A pool p, destination dc d) with pipeline ∈
  {P-MD, P-RLD-MD, P-RLD, P-D, A} (A: d = dc(p), no KV moves): P-MD to d = dc(p) (RDMA) or over a line dc(p)→d;
  P-RLD-MD over a line (RLD in dc(p)); P-RLD only for filterable k, d = dc(p);
  P-D as the architecture allows (same dc, or over a line).

Parameters (units in names; from :mod:`placer.perfmodel` and :mod:`placer.flows` at the planning caps)
----------
* pre[k,p] prefill seconds; wan_bytes[k] = (1−h_k)·I_k·kv (DRC) or I_k·kv;
  ttft[f] = pre + transfer to the decoder that streams the first token (RLD by RDMA on
  the relay pipelines; MD/D by RDMA, or over the WAN at the line's planned utilisation
  u_L): P samples t0 but that decoder streams it on importing the KV, before any decode
  step (executor/roles; :func:`placer.flows.ttft_det_s`), so no TPOT is added. An RDMA
  move runs at the slower NIC of P and the slowest candidate decoder at that site;
  late[f] = P(wait at p + WAN slowdown > TTFT_SLA − ttft₀[f]) (:meth:`placer.flows.Route.
  first_token_law`): ttft₀ takes the line unloaded, its slowdown at u_L (mean
  b/C·u_L/(1−u_L)) is exponential, the wait M/G/1 at the queue's utilisation u_t: a
  "mix" queue carries the class mix in proportion (C13), so its moments are the mix's;
  a light queue's E[S²]/E[S] is bounded by its light classes' largest (any light mix); a
  "set" queue's moments are its subset's mix (:func:`placer.p_queues.set_wait_law`);
  both over each class's spread of prompt lengths (new_tokens_cv2, two points:
  :func:`placer.p_queues.prefill_points`), so a class's long prompts lengthen the wait;
  hold[f] = pre + transfer (seconds P keeps the request's KV staged).
* Decode pool q: design batch B_q (largest meeting TPOT at the mix's context and holding the
  mix's reserved KV at the occupancy quantile, :func:`placer.flows.decode_design`), step
  t_q = step(B_q); KV footprint f_k = I_k + O_k in whole blocks (a decoder reserves a request's
  final context on admission and keeps it until the request leaves: :mod:`placer.kv_admission`,
  the simulator's and the executor's rule) and its row weight w_k = f_k·(1 + z·f_k/(2s_q)) with
  limit K_q − z·s_q/2 (z: the 0.95 normal quantile; s_q: a full instance's KV standard
  deviation under the mix — the tangent that makes the occupancy quantile linear);
  tokens[k,role,f]: O_k on MD/D, on RLD the eager
  tokens min(O_k, ⌈T_wan/t_q⌉) (P-RLD-MD: RLD holds the request, KV and slot, for the
  whole transfer T_wan, one token per step of its own batch) or O_k (P-RLD, filtered).
* A queue a: ttft[f] = ⌈n_k/C⌉·t_a (n_k = (1−h_k)·I_k new tokens; streamed by the
  instance itself); late[f] = P(budget wait > TTFT_SLA − ttft[f]), M/G/1 with service
  n_k·t_a/C at u_t (mix moments, or the longest light service).
* price_q = tp·price_chip (USD/h), power_q = tp·TDP (kW), K_q KV bytes per instance.

Variables
---------
* n_q ∈ ℤ, 0 ≤ n_q ≤ min(max_instances, ⌊inventory/tp⌋, what carries the whole load
  alone): instances of physical pool q = (role, dc, chip, tp).
* c_{p,t} ≥ 0 with Σ_t c_{p,t} = n_p (C0): a P or A pool's instances split over its
  queues (continuous: instances may serve queues part-time; a "set" queue's tiers sum to an
  integer, ``Pool.whole``).
* x_f ≥ 0 (req/s): class-k traffic on flow f. G ≥ 0: served req/s (mix fixed). A relayed
  (P-RLD-MD) flow whose lateness and P rows do not depend on its line is carried by two
  columns instead (:mod:`placer.ilp.columns`, exact): r[k,p] on the P side, y[k,s→d] on the
  line's side, joined by (C17).
* z[k,q] ≥ 0 (req/s): class-k requests decoded by decode pool q (RLD: z[k,pipe,d,q]).

Constraints (each cited in the code as (C0)…(C19))
-----------
(C1) demand      Σ_{f∈F_k} x_f = s_k · G                         ∀k
(C2) load        f_min·arrival ≤ G ≤ arrival (bcr, max-goodput; f_min = options.
                 min_served_fraction, 1 by default); G = arrival (min-cost)
(C3) P capacity  Σ_{f: p(f)=p} pre[k,p] · x_f ≤ κ_p · u_t · c_{p,t}  ∀ P pools p, tiers t
(C4) P memory    Σ_{f: p(f)=p} hold[f] · I_k · kv · x_f ≤ κ_p · K_p · c_{p,t} (Little's law)
(C5) decode split Σ_{q MD in d} z[k,q] = Σ_{f→d, MD pipelines} x_f ∀k,d (RLD: Σ_{q RLD in dc(p)} z[k,pipe,d,q] = Σ_{f: RLD} x_f)
(C6) decode slots Σ z · tokens · t_q ≤ κ_q · u · B_q · n_q         ∀ decode pools q
     and its step row Σ z · held · c_k ≤ κ_q · (s_max − a) · n_q: the step a + Σ_k L_k·c_k (c_k what a
     request of context x_k = I_k + tokens/2 adds; a batch steps at its mean context) held at
     s_max = min(a + u·(TPOT − a), t_q), a request held tokens × s_max (RLD's relayed ones their line's
     hold): the step's fixed point s = a/(1 − Σ λ_k·O_k·c_k) made linear (:mod:`placer.decode_slots`);
     left out where the count row implies it (at the mix it always does). (C5)-(C7): placer.ilp.decode_rows
(C7) decode memory Σ z · tokens · t_q · w_k · kv · r_f ≤ κ_q · (K_q − z·s_q/2) · kv · n_q (Little's law
     on the reserved KV; the requests on an instance are Poisson in number (M/G/∞), their KV compound
     Poisson with mean M = Σ L_k f_k and variance V = Σ L_k f_k²: the row is M + z·√V ≤ K with √V
     bounded by its tangent V/(2s) + s/2, so at most ~5 % of arrivals find the KV full and wait)
     r_f = 1, except on RLD for P-RLD-MD: r_f = :func:`placer.flows.relay_room_factor` at u_L.
     RLD holds a relayed request while its KV crosses the line, and a processor-sharing
     line's transfers in flight are geometric (P(N ≥ n) = u_Lⁿ), so they bunch: RLD gets
     room for their 99th percentile, not just their mean (else admission waits in bursts
     and the relay's first token with it — 5g-low-hit's relay route was +19.7 % in the
     simulator before this row)
(C8) link        Σ_{f over line s→d} x_f · wan_bytes[k,d] · 8/1e9 ≤ κ_L · u_L · Gbit/s(s→d)
     wan_bytes[k,d] = (1−h_{k,d})·I_k·kv (DRC; I_k·kv without): h_{k,d} the hit d's decoders hold,
     P's h_k unless a trace's routing says they hold less (Problem.decode_hit, placer.workload.decode_hits)
     κ_q, κ_L ∈ (0, 1]: a pool's or a line's capacity factor, 1 unless ``optimize --verify``
     cut it (Problem.pool_capacity / line_capacity, placer.cuts)
(C9) inventory   Σ_{q of chip c in dc} tp_q · n_q ≤ inventory[dc][c]
(C10) power      Σ_{q in dc} power_q · n_q ≤ power_kw[dc]
(C11) SLA        Σ_f late[f] · x_f ≤ (1 − 0.90) · G  (P90 TTFT: at most 10 % late)
(C12) budget     Σ price_q n_q ≤ budget (max-goodput only)
(C13) mix queue  Σ_{f∈F_k, p(f)=t} x_f = s_k · X_t for every "mix" queue t (P or A) and class k;
                 a "set" queue t over K_t: = s_k / Σ_{j∈K_t} s_j · X_t for k ∈ K_t (others not admitted):
                 prfaas's restricted datacenters, and a PDD pool's heavy (K_H) and light-set (K_L) queues
(C14) A budget   Σ_{f: p(f)=a} n_k·t_a/C · x_f ≤ κ_a · u_t · c_{a,t}      ∀ A queues
(C15) A slots    Σ_{f: p(f)=a} O_k·t_a · x_f ≤ κ_a · u · B_a · c_{a,t}
(C16) A memory   Σ_{f: p(f)=a} (ttft[f]·I_k + O_k·t_a·(I_k + O_k/2))·kv · x_f ≤ κ_a · K_a · c_{a,t}
(C17) relay balance Σ_p r[k,p] = Σ_d y[k,s→d]  for each class k and datacenter s (p at s)
(C18) decode cover  Σ_q R_q n_q ≥ D per decode shape and its integer roundings (implied by whole n_q; placer.ilp.covers)
(C19) local decoder the share of chip c's inventory in d busy prefilling requests decoded in d by role r
                 ≤ Σ_{q of role r in d} n_q, and a line's busy share (C8) ≤ the MD and D instances at its end
                 (implied by whole n_q; placer.ilp.local_decoders)
Rows implied by another are left out: (C4) where every flow's staged KV takes a smaller share of
the instance's memory than its prefill of the instance's time (so (C3) binds first; 685 of 704
queues on sixteen-dc), (C7) where the design batch of the pool's heaviest request still fits its
memory (so (C6) binds first). Same optimum, a smaller LP per branch-and-bound node.

Objective
---------
goodput = Σ_f (1 − late[f]) x_f (req/s meeting the SLA); cost = Σ_q price_q n_q.
* bcr: maximise goodput / cost exactly by Dinkelbach: repeatedly maximise
  goodput − λ·cost and set λ ← goodput/cost until the optimum is ≤ 0
  (see :mod:`placer.ilp.dinkelbach`), then, among plans with that ratio, the most goodput.
* min-cost: minimise cost with G = arrival.  * max-goodput: maximise goodput, (C12).

Code: data, then model, then solve. :func:`prepare` computes the sets and parameters
(no model); :func:`build` adds the variables and one family of rows at a time, each
adder citing its row above; :mod:`placer.ilp.dinkelbach` sets the objective and solves.
The flow physics (KV bytes and seconds, eager tokens, queue laws) comes from
:mod:`placer.flows`, which the checkers (`evaluate`, `validate`, the simulator) share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from placer.flows import instance
from placer.pdd import AGG, MIX, P, P_D, P_RLD_MD, PREFILL_ROLES, SLA_QUANTILE
from placer.ilp.columns import Columns, add_columns, implied, relay_lines
from placer.ilp.config import check_build_deadline, checked
from placer.ilp.covers import decode_covers
from placer.ilp.data import Architecture, DecodeDesign, Flow, Pool, Prepared, add_whole_sets, pdd_architecture, prepare
from placer.ilp.decode_rows import GB, add_decode
from placer.ilp.local_decoders import local_decoders as local_decoder_rows
from placer.ilp.model import LinearModel
from placer.perfmodel import InstanceModel
from placer.problem import Datacenter, Problem

__all__ = ["Architecture", "Formulation", "build", "pdd_architecture", "prepare"]

@dataclass
class Formulation:
    """The built model plus the index maps extraction needs."""

    problem: Problem
    arch: Architecture
    model: LinearModel
    pools: list[Pool]
    n: dict[tuple, int]  # physical pool key (role, dc, chip, tp) -> integer count
    tier: dict[Pool, int]  # P pool tier -> its continuous share of the instances
    flows: list[Flow]
    x: dict[Flow, int]  # flows with a column of their own (relayed ones split at RLD are in ``columns``)
    z: dict[tuple, int]  # (k, pipeline, dst, pool) -> var; MD/D keyed with pipeline None
    g: int
    goodput: dict[int, float]  # var -> coefficient (1 - late)
    cost: dict[int, float]
    instances: dict[Pool, InstanceModel]
    ttft_s: dict[Flow, float]  # without queueing: diagnose() names the fastest when the SLA binds
    notes: list[str] = field(default_factory=list)
    decode: dict[Pool, DecodeDesign] = field(default_factory=dict)  # design batch B_q of each decode pool
    prefill_s: dict[tuple[int, Pool], float] = field(default_factory=dict)  # pre[k,p]
    columns: Columns = field(default_factory=Columns)  # every flow's column(s) (placer.ilp.columns)
    covers: list = field(default_factory=list)  # (C18) rows not yet in the model (placer.ilp.covers.take_covers)
    local: list = field(default_factory=list)  # (C19) likewise (placer.ilp.local_decoders.take_local_decoders)
    #: the least-cost LP's solution without (C19) where its LP kept them (placer.ilp.local_decoders.in_least_cost):
    #: what a first plan is rounded from (placer.ilp.starts._rounded_start)
    plain_lp: list[float] | None = None
    #: seconds the model's last LP relaxation took (the least-cost one, then each of
    #: :func:`placer.ilp.local_decoders.take_local_decoders`'s: the next of those starts only with that much time left)
    separation_s: float = 0.0

    def rates(self, values: list[float]) -> dict[Flow, float]:
        """req/s on each flow of a solution (:meth:`placer.ilp.columns.Columns.rates`)."""
        return self.columns.rates(values)


# --- model: variables and one adder per constraint family ------------------------------

def _add_counts(m: LinearModel, data: Prepared) -> tuple[dict[tuple, int], dict[Pool, int]]:
    """n_q per physical pool (integer) and c_{p,t} per P or A queue, with (C0) Σ_t c_{p,t} = n_p."""
    n: dict[tuple, int] = {}
    for key, ub in data.bounds.items():
        n[key] = m.var(f"n[{','.join(map(str, key[:3]))},tp{key[3]}]", 0, ub, integer=True)
    tier: dict[Pool, int] = {}
    for q in data.pools:
        if q.role in PREFILL_ROLES:
            tier[q] = m.var(f"tier[{q.label}]", 0, m.vars[n[q.key]].ub)
    add_whole_sets(m, tier, n)  # a "set" queue's tiers together on whole instances (placer.ilp.p_cuts)
    queues: dict[tuple, list[Pool]] = {}  # physical pool -> its queues, grouped once (100 sites: 4.7 s as a scan)
    for q in tier:
        queues.setdefault(q.key, []).append(q)
    for key, var in n.items():
        if key.role in PREFILL_ROLES:
            parts = {tier[q]: 1.0 for q in queues.get(key, [])}
            m.add(f"tiers[{','.join(f'{v}' for v in key)}]", "tiers", {**parts, var: -1.0}, "==", 0.0)
    return n, tier


def _add_demand(m: LinearModel, problem: Problem, data: Prepared, cols: Columns, g: int) -> None:
    """(C1) demand: Σ_{f∈F_k} x_f = s_k · G for every class k."""
    for k, c in enumerate(problem.classes):
        coeffs = {cols.p_side(f): 1.0 for f in data.by_class[k]}
        coeffs[g] = -c.share
        m.add(f"demand[{c.name}]", "demand", coeffs, "==", 0.0)


def _add_mix(m: LinearModel, problem: Problem, data: Prepared, cols: Columns, p: Pool) -> None:
    """(C13) mix queue: Σ_{f∈F_k, p(f)=t} x_f = s_k · X_t for the "mix" queue t = p and every class k;
    a "set" queue (``p.admits``) its classes k ∈ K_t only, s_k renormalised over them."""
    total = m.var(f"X[{p.label}]")
    classes = sorted(p.admits) if p.admits else range(len(problem.classes))
    whole = sum(problem.classes[k].share for k in classes) if p.admits else 1.0
    for k in classes:
        c = problem.classes[k]
        m.add(f"mix[{c.name},{p.label}]", "mix",
              {**{cols.p_side(f): 1.0 for f in data.by_pool[p] if f.k == k}, total: -c.share / whole}, "==", 0.0)


def _add_p_capacity(m: LinearModel, problem: Problem, data: Prepared, cols: Columns, tier: dict, p: Pool) -> None:
    """(C3) P capacity: Σ_{f: p(f)=p} pre[k,p] · x_f ≤ κ_p · u_t · c_{p,t}."""
    cap = p.util * problem.pool_capacity.get(p.key, 1.0)
    m.add(f"p_capacity[{p.label}]", "p_capacity",
          {**{cols.p_side(f): data.prefill[(f.k, p)] for f in data.by_pool[p]}, tier[p]: -cap}, "<=", 0.0)


def _p_memory_gb_s(problem: Problem, data: Prepared, f: Flow) -> float | None:
    """(C4)'s coefficient of flow f: hold[f] · I_k · kv in GB·s (None: no such flow was priced)."""
    hold = data.hold.get(f)
    return None if hold is None else hold * problem.classes[f.k].input_tokens * problem.kv_bytes_per_token / GB


def _p_memory_implied(problem: Problem, data: Prepared) -> tuple[set[Pool], dict[Pool, dict[int, bool]]]:
    """The P queues whose (C4) follows from their (C3) (:func:`placer.ilp.columns.implied`: every flow
    holds its KV for a shorter share of the instance's memory than of its prefill time, as with
    RDMA moves and most lines), and, per such queue and class, whether that holds on every line
    a relayed request may take from its datacenter (then it may be split at RLD)."""
    lines = relay_lines(data)
    dropped: set[Pool] = set()
    split_ok: dict[Pool, dict[int, bool]] = {}
    for p in data.pools:
        if p.role != P:
            continue
        check_build_deadline()
        memory_gb = data.instances[p].kv_capacity_bytes / GB

        def holds(flows: list[Flow]) -> bool:
            load = {f: _p_memory_gb_s(problem, data, f) for f in flows}
            return (None not in load.values()
                    and implied(load, memory_gb, {f: data.prefill[(f.k, p)] for f in flows}, p.util))
        if not holds(data.by_pool.get(p, [])):
            continue
        dropped.add(p)
        split_ok[p] = {k: holds([Flow(k, P_RLD_MD, p, d) for d in ds])
                       for (k, s), ds in lines.items() if s == p.dc}
    return dropped, split_ok


def _add_p_memory(m: LinearModel, problem: Problem, data: Prepared, cols: Columns, tier: dict, p: Pool) -> None:
    """(C4) P memory: Σ_{f: p(f)=p} hold[f] · I_k · kv · x_f ≤ κ_p · K_p · c_{p,t} (Little's law), in GB;
    only where (C3) does not imply it (:func:`_p_memory_implied`), so every flow has its own column."""
    capacity = data.instances[p].kv_capacity_bytes / GB * problem.pool_capacity.get(p.key, 1.0)
    m.add(f"p_memory[{p.label}]", "p_memory",
          {**{cols.x[f]: _p_memory_gb_s(problem, data, f) for f in data.by_pool[p]}, tier[p]: -capacity}, "<=", 0.0)


def _add_links(m: LinearModel, problem: Problem, arch: Architecture, data: Prepared, cols: Columns) -> None:
    """(C8) link: Σ_{f over line s→d} x_f · wan_bytes[k,d] · 8/1e9 ≤ κ_L · u_L · Gbit/s(s→d) (wan_bytes at what
    d's decoders hold: :meth:`placer.problem.Problem.decode_hit`)."""
    for (s, d), link in sorted(problem.links.items()):
        check_build_deadline()
        over = data.by_link[(s, d)]
        if not over:
            continue
        coeffs = {cols.x[f]: data.wan_bytes[(f.k, arch.drc if f.pipeline != P_D else False, d)] * 8 / 1e9
                  for f in over if f in cols.x}
        coeffs.update({y: data.wan_bytes[(k, arch.drc, d)] * 8 / 1e9 for (k, a, b), y in cols.relay_out.items()
                       if (a, b) == (s, d)})
        limit = problem.options.link_utilization_cap * link.gbit_per_s * problem.line_capacity.get((s, d), 1.0)
        m.add(f"link[{s}->{d}]", "link", coeffs, "<=", limit)


def _add_inventory(m: LinearModel, dc: Datacenter, n: dict) -> None:
    """(C9) inventory: Σ_{q of chip c in dc} tp_q · n_q ≤ inventory[dc][c]."""
    for chip, count in dc.inventory.items():
        coeffs = {var: key.tp for key, var in n.items() if key.datacenter == dc.name and key.chip == chip}
        if coeffs:
            m.add(f"inventory[{dc.name},{chip}]", "inventory", coeffs, "<=", count)


def _add_power(m: LinearModel, problem: Problem, dc: Datacenter, n: dict) -> None:
    """(C10) power: Σ_{q in dc} power_q · n_q ≤ power_kw[dc]."""
    if dc.power_kw is None:
        return
    coeffs = {var: instance(problem, key.chip, key.tp).power_kw for key, var in n.items() if key.datacenter == dc.name}
    if coeffs:
        m.add(f"power[{dc.name}]", "power", coeffs, "<=", dc.power_kw)


def _add_agg(m: LinearModel, problem: Problem, data: Prepared, x: dict[Flow, int], tier: dict, a: Pool) -> None:
    """(C14) A prefill budget: Σ_{f: p(f)=a} n_k·t_a/C_a · x_f ≤ κ_a · u_t · c_{a,t};
    (C15) A decode slots: Σ O_k·t_a · x_f ≤ κ_a · u · B_a · c_{a,t};
    (C16) A memory: Σ (ttft₀[f]·I_k + O_k·t_a·(I_k + O_k/2)) · kv · x_f ≤ κ_a · K_a · c_{a,t}
    (Little's law), in GB."""
    design, kappa = data.agg[a], problem.pool_capacity.get(a.key, 1.0)
    kv, flows = problem.kv_bytes_per_token, data.by_pool[a]
    classes = problem.classes
    m.add(f"a_budget[{a.label}]", "a_budget",
          {**{x[f]: data.prefill[(f.k, a)] for f in flows}, tier[a]: -kappa * a.util}, "<=", 0.0)
    slots = problem.options.utilization_cap * design.batch * kappa
    m.add(f"a_slots[{a.label}]", "a_slots",
          {**{x[f]: design.decode_s(classes[f.k]) for f in flows}, tier[a]: -slots}, "<=", 0.0)
    m.add(f"a_memory[{a.label}]", "a_memory",
          {**{x[f]: design.resident_byte_s(classes[f.k], kv) / GB for f in flows},
           tier[a]: -design.im.kv_capacity_bytes / GB * kappa}, "<=", 0.0)


def _add_sla(m: LinearModel, data: Prepared, cols: Columns, g: int) -> None:
    """(C11) SLA: Σ_f late[f] · x_f ≤ (1 − 0.90) · G (at most 10 % of served requests late)."""
    late = {cols.p_side(f): data.late[f] for f in checked(data.flows)}
    m.add("sla[ttft_p90]", "sla", {**late, g: -(1 - SLA_QUANTILE)}, "<=", 0.0)


def _bound_load(m: LinearModel, problem: Problem, g: int, objective: str) -> None:
    """(C2) load: G = arrival (min-cost); f_min·arrival ≤ G ≤ arrival otherwise."""
    if objective == "min-cost":
        m.set_bounds(g, problem.arrival_rps, problem.arrival_rps)
    else:
        m.set_bounds(g, problem.options.min_served_fraction * problem.arrival_rps, problem.arrival_rps)


def _add_budget(m: LinearModel, problem: Problem, cost: dict[int, float]) -> None:
    """(C12) budget: Σ price_q n_q ≤ budget."""
    m.add("budget", "budget", dict(cost), "<=", problem.options.budget_usd_per_h)


def build(problem: Problem, arch: Architecture, objective: str = "bcr", split_relays: bool = True,
          covers: bool = True, local_decoders: bool = True) -> Formulation:
    """Build the MILP for ``arch``: the data, then the variables and each family of rows in
    turn; the objective coefficients are set by the caller. ``split_relays``: relayed flows split
    at RLD where exact (:mod:`placer.ilp.columns`); False gives every flow its own column (the
    same optimum, a larger model: for comparison); ``covers``: the decode cover rows (C18,
    :mod:`placer.ilp.covers`; False: the same optimum, a weaker relaxation); ``local_decoders``: (C19) likewise
    (:mod:`placer.ilp.local_decoders`)."""
    data = prepare(problem, arch)
    m = LinearModel()
    n, tier = _add_counts(m, data)
    g = m.var("G", 0, problem.arrival_rps)
    implied_memory, split_ok = _p_memory_implied(problem, data)
    cols = add_columns(m, problem, data, split_ok if split_relays else {})

    _add_demand(m, problem, data, cols, g)
    for p in (q for q in data.pools if q.role == P):
        check_build_deadline()
        if p.mix == MIX or p.admits:
            _add_mix(m, problem, data, cols, p)
        _add_p_capacity(m, problem, data, cols, tier, p)
        if p not in implied_memory:
            _add_p_memory(m, problem, data, cols, tier, p)
    for a in (q for q in data.pools if q.role == AGG):
        check_build_deadline()
        if a.mix == MIX:
            _add_mix(m, problem, data, cols, a)
        _add_agg(m, problem, data, cols.x, tier, a)
    load = add_decode(m, problem, data, cols, n)
    _add_links(m, problem, arch, data, cols)
    for dc in problem.datacenters:
        _add_inventory(m, dc, n)
        _add_power(m, problem, dc, n)
    if arch.enforce_sla:
        _add_sla(m, data, cols, g)
    _bound_load(m, problem, g, objective)
    # (C18) and (C19) kept aside: Dinkelbach's rounds on the whole model take them (placer.ilp.covers,
    # placer.ilp.local_decoders; the latter after the link rows they read)
    aside = decode_covers(m, data, load.z, n, g, [c.share for c in problem.classes]) if covers else []
    local = local_decoder_rows(m, problem, data, cols, n) if local_decoders else []

    goodput = {cols.p_side(f): 1.0 - data.late[f] for f in checked(data.flows)}
    cost = {var: instance(problem, key.chip, key.tp).price_usd_per_h for key, var in n.items()}
    if objective == "max-goodput" and problem.options.budget_usd_per_h is not None:
        _add_budget(m, problem, cost)
    return Formulation(problem, arch, m, data.pools, n, tier, data.flows, cols.x, load.z, g, goodput, cost,
                       data.instances, data.ttft, data.notes, data.decode, data.prefill, cols, aside, local)
