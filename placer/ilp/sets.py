"""The MILP's sets as objects: the architecture a plan may use, candidate pools (P and A pools split
into queues), flows, decode designs, and the prepared data that holds them.

in:  nothing but the base layer's names (roles, pipelines, pool keys) and the designs' types
out: :class:`Architecture` (+ :func:`pdd_architecture`), :class:`Pool`, :class:`Flow`,
     :class:`DecodeDesign`, :class:`Prepared` — built by :func:`placer.ilp.data.prepare`, read by
     :mod:`placer.ilp.formulation` and the columns; re-exported by :mod:`placer.ilp.data`;
     :func:`set_queue_name` (the admitted classes of a "set" P queue, as plans name it).
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.aggregated import AggDesign
from placer.flows import class_kv_weight
from placer.kv_admission import KvHeadroom
from placer.pdd import AGG, P, P_A, P_MD, P_RLD, P_RLD_MD, PREFILL_ROLES, queue_label
from placer.perfmodel import InstanceModel
from placer.plan import PoolKey
from placer.problem import Problem


class _HashedOnce:
    """A frozen dataclass whose hash is computed once: building eight-dc's model looks pools and flows
    up in dicts ~350 000 times, and hashing a flow re-hashes its pool and shape each time (~30 % of
    the build). The hash stays out of pickles (a string's hash differs between processes)."""

    def __hash__(self) -> int:
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = self.__dict__["_hash"] = hash(tuple(getattr(self, name) for name in self.__dataclass_fields__))
            return value

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class Pool(_HashedOnce):
    __hash__ = _HashedOnce.__hash__  # in the body, or dataclass writes its own
    role: str
    dc: str
    chip: str
    tp: int  # a placer.shapes.Shape: the chip count and how they split the model
    util: float = 0.0  # P and A pools: the planned utilisation tier (its queueing law); 0 for decode
    mix: str = ""  # P and A pools: "mix" (the scenario's class mix, in proportion) or "light" classes only
    chunk: int = 0  # A pools: prompt tokens per step (placer.aggregated)
    #: P pools of a datacenter the architecture restricts (``Architecture.p_admits``): the classes its
    #: "set" queue admits, in proportion among themselves (C13); ``mix`` then names them (:func:`set_queue_name`)
    admits: frozenset[int] | None = None
    #: a "set" P queue on whole instances (its set's tiers on the pool sum to an integer count,
    #: :func:`placer.ilp.p_cuts.add_whole_sets`): PDD's heavy/light split and tail cuts — on an instance
    #: one shared with another queue, one FCFS line, short prompts would wait behind long ones
    whole: bool = False

    @property
    def key(self) -> PoolKey:
        """The physical pool this candidate (or P/A queue of it) belongs to."""
        return PoolKey(self.role, self.dc, self.chip, self.tp)

    @property
    def queue(self) -> str:
        """The P or A queue this tier is: utilisation and admitted classes (A: and chunk), e.g. 'u0.56/light'."""
        if self.role == AGG:
            return queue_label(self.util, self.mix, self.chunk)
        if self.whole:  # kind first ('set:cold+odd/u0.800'): it sorts before every 'u…' queue of the pool,
            return f"{self.mix}/u{self.util:.3f}"  # so the layout (in name order) gives it whole instances
        return f"u{self.util:.3f}/{self.mix}" if self.role == P else ""

    @property
    def label(self) -> str:
        tier = f",{self.queue}" if self.role in PREFILL_ROLES else ""
        return f"{self.role},{self.dc},{self.chip},tp{self.tp}{tier}"


@dataclass(frozen=True)
class Architecture:
    """Which roles and pipelines a plan may use (PDD, or one of the PD baselines)."""

    name: str
    pipelines: tuple[str, ...]
    drc: bool = True
    p_dcs: frozenset[str] | None = None  # None: any
    decode_dcs: frozenset[str] | None = None
    chips: frozenset[str] | None = None  # None: any chip
    same_dc: bool | None = None  # P-D: True same dc only, False cross-dc only, None both
    enforce_sla: bool = True  # False: drop (C11), to show what a baseline that cannot meet the SLA does
    #: (datacenter, class indices): P pools there admit only those classes, in proportion among themselves
    #: (a "set" queue per tier, no light queue: C13 over the subset); datacenters not named admit every
    #: class (PrfaaS's threshold: the remote datacenters the long classes, the local one the rest)
    p_admits: tuple[tuple[str, frozenset[int]], ...] = ()

    def admits(self, dc: str) -> frozenset[int] | None:
        """The classes P pools in ``dc`` admit (None: every class, the "mix" and "light" queues)."""
        return next((classes for name, classes in self.p_admits if name == dc), None)


def pdd_architecture(problem: Problem, aggregated: bool | None = None) -> Architecture:
    """PDD's pipelines, and aggregated pools beside them when ``aggregated`` (None: as
    ``options.aggregated`` says; `evaluate_plan` passes True for a plan that has A pools)."""
    pipes = [P_MD, P_RLD_MD]
    if problem.options.filter:
        pipes.append(P_RLD)
    if problem.options.aggregated if aggregated is None else aggregated:
        pipes.append(P_A)
    return Architecture("pdd", tuple(pipes), drc=problem.options.drc)


#: A "set" P queue's name starts so: ``set:`` and its classes joined by ``+``, e.g. 'u0.800/set:cold+odd'.
SET_PREFIX = "set:"


def set_queue_name(problem: Problem, admits: frozenset[int]) -> str:
    """The ``mix`` of a "set" P queue admitting the classes ``admits``: 'set:' and their names."""
    return SET_PREFIX + "+".join(problem.classes[k].name for k in sorted(admits))


@dataclass(frozen=True)
class Flow(_HashedOnce):
    __hash__ = _HashedOnce.__hash__
    k: int
    pipeline: str
    p: Pool
    dst: str

    @property
    def src(self) -> str:
        return self.p.dc

    @property
    def crosses(self) -> bool:
        return self.dst != self.p.dc


@dataclass
class DecodeDesign:
    """A decode pool's design at the scenario's mix (:func:`placer.flows.decode_design`) — batch
    B_q and step t_q of (C6) — and its KV row per instance, (C7)'s footprint weights and limit
    (:func:`placer.flows.decode_kv_headroom`)."""

    im: InstanceModel
    batch: int
    step_s: float
    context_tokens: float
    kv: KvHeadroom | None = None

    def kv_weight(self, c) -> float:
        """KV tokens one held request of class ``c`` counts for on (C7): its reserved footprint plus
        its share of the occupancy headroom (:meth:`~placer.kv_admission.KvHeadroom.weight`)."""
        return class_kv_weight(self.kv, c)

    @property
    def kv_limit_tokens(self) -> float:
        """(C7)'s right-hand side per instance, tokens: K − z·s/2."""
        return self.kv.limit_tokens


@dataclass
class Prepared:
    """The MILP's data (sets and parameters of the docstring), before any variable exists."""

    pools: list[Pool]  # Q: P queues and decode pools
    instances: dict[Pool, InstanceModel]
    decode: dict[Pool, DecodeDesign]  # decode pool -> design batch B_q and step t_q
    agg: dict[Pool, AggDesign]  # A queue -> its design (chunk C, batch B, step t)
    notes: list[str]  # candidates left out, and why
    bounds: dict[tuple, int]  # physical pool key -> upper bound on n_q
    flows: list[Flow]  # F: admitted by their P queue, dominated relayed flows dropped
    prefill: dict[tuple[int, Pool], float]  # pre[k,p]
    ttft: dict[Flow, float]  # ttft[f] without queueing (every admitted flow, dropped ones too)
    late: dict[Flow, float]  # late[f]
    hold: dict[Flow, float]  # hold[f]
    eager: dict[Flow, float]  # relayed flow: seconds RLD relays it (the WAN transfer; inf: P-RLD, to the end)
    wan_bytes: dict[tuple[int, bool, str], float]  # (k, drc, destination) -> KV bytes over the WAN
    by_class: dict[int, list[Flow]]
    by_pool: dict[Pool, list[Flow]]
    by_route: dict[tuple[int, str, str], list[Flow]]  # (k, pipeline, dst)
    by_link: dict[tuple[str, str], list[Flow]]  # (src, dst)
