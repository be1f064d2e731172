"""Resolve a validated :class:`~placer.specs.Scenario` into the planner's problem.

in:  Scenario (pydantic) + the bundled catalog (+ optional measured chip profiles)
out: :class:`Problem`, frozen dataclasses with every name resolved, the model's KV
     size computed, trace workloads bucketed into classes and anomalous classes flagged,
     and the measured latency tables that match the scenario's model and dtypes, by
     (chip, tp), each checked against the chip's datasheet peaks
     (:func:`placer.profiles.lookup.matching_tables`); tables measured for another
     model or dtype are listed in ``tables_ignored`` and never used. A trace workload keeps
     its trace's path (``trace``) and, once a plan has routed it, the decode-side hit per
     (class, destination) (``decode_hits``, :mod:`placer.workload.decode_hits`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING

from placer.catalog import Chip, ModelConfig, chip_catalog, get_chip, get_model
from placer.errors import InputError, UnknownChipError
from placer.pdd import FilterRule
from placer.specs import ChipSpec, Scenario

if TYPE_CHECKING:
    from placer.executor_runtime import ExecutorRuntime
    from placer.profiles.tables import MeasuredTable


@dataclass(frozen=True)
class Datacenter:
    name: str
    inventory: dict[str, int]
    power_kw: float | None


@dataclass(frozen=True)
class Link:
    """One direction of a WAN line."""

    src: str
    dst: str
    gbit_per_s: float
    rtt_ms: float
    jitter_ms: float = 0.0

    @property
    def bytes_per_s(self) -> float:
        return self.gbit_per_s * 1e9 / 8

    @property
    def rtt_s(self) -> float:
        return self.rtt_ms / 1000


@dataclass(frozen=True)
class Class:
    name: str
    share: float
    input_tokens: int
    output_tokens: int
    hit_rate: float
    filterable: bool  # the scenario's FilterRule holds: may finish on RLD (P-RLD)
    new_tokens_cv2: float = 0.0  # variance / mean² of the class's uncached prompt tokens (the tail it holds)
    output_tokens_cv2: float = 0.0  # variance / mean² of its output tokens

    @property
    def new_tokens(self) -> float:
        return (1.0 - self.hit_rate) * self.input_tokens


@dataclass(frozen=True)
class Problem:
    name: str
    model: ModelConfig
    kv_dtype: str
    weight_dtype: str
    chips: dict[str, Chip]
    datacenters: tuple[Datacenter, ...]
    links: dict[tuple[str, str], Link]  # both directions of every line
    classes: tuple[Class, ...]
    arrival_rps: float
    ttft_p90_s: float
    tpot_s: float
    options: object  # placer.specs.OptionsSpec (frozen pydantic)
    profiles_used: tuple[str, ...] = ()
    tables: dict[tuple[str, int], MeasuredTable] = field(default_factory=dict)  # (chip, tp) → table
    tables_ignored: tuple[str, ...] = ()  # tables read but not for this model / dtypes, and why
    #: factors in (0, 1] on a pool's or a line's planned capacity (``optimize --verify``'s cuts,
    #: placer.cuts): (role, dc, chip, tp) → factor, (src, dst) → factor; absent means 1
    pool_capacity: dict[tuple, float] = field(default_factory=dict)
    line_capacity: dict[tuple[str, str], float] = field(default_factory=dict)
    #: the serving engine the numbers assume (placer.specs.ENGINES, optionally ``name==version``)
    engine: str = "roofline"
    #: squared coefficient of variation of the inter-arrival times (1: Poisson; placer.specs.WorkloadSpec)
    arrival_cv2: float = 1.0
    #: the executor's measured runtime the plan's TTFT includes (``placer evaluate/optimize --runtime``:
    #: placer.executor_costs); None: the planner's idealised deployment
    runtime: ExecutorRuntime | None = None
    #: the JSONL trace the classes were fitted from (``workload.trace`` without ``classes``); None: drawn classes
    trace: str | None = None
    #: (class name, destination datacenter) → the share of the class's prompts that datacenter's decoders hold,
    #: where it differs from P's hit: a trace routed by a plan (conversations' turns decoded elsewhere,
    #: :func:`placer.workload.decode_hits.held_hits`); absent: the decoders hold what P's prefix store holds
    decode_hits: dict[tuple[str, str], float] = field(default_factory=dict)

    def decode_hit(self, cls: Class, dst: str) -> float:
        """The prefix hit of class ``cls`` at the decoders of ``dst``: P's hit, or less where
        :attr:`decode_hits` says those decoders hold less of the class's prompts."""
        return min(cls.hit_rate, self.decode_hits.get((cls.name, dst), cls.hit_rate))

    @cached_property
    def instance_models(self) -> dict[tuple, object]:
        """(chip, tp) → the instance model :func:`placer.flows.instance` built for this problem (filled there)."""
        return {}

    @cached_property
    def kv_bytes_per_token(self) -> float:
        return self.model.kv_bytes_per_token(self.kv_dtype)

    @cached_property
    def dc_names(self) -> tuple[str, ...]:
        return tuple(dc.name for dc in self.datacenters)

    def dc(self, name: str) -> Datacenter:
        return next(d for d in self.datacenters if d.name == name)


def without_lines(problem: Problem) -> Problem:
    """``problem`` with no WAN lines: each datacenter on its own (:mod:`placer.ilp.local_first`). Lines do not
    change an instance, so it shares ``problem``'s instance models and what they keep."""
    local = replace(problem, links={}, line_capacity={})
    local.__dict__["instance_models"] = problem.instance_models  # as functools.cached_property keeps its value
    return local


_CHIP_FIELDS = {f.name for f in fields(Chip)}


def _resolve_chip(spec: ChipSpec) -> Chip:
    changes = {k: v for k, v in spec.model_dump(exclude={"name", "base"}).items() if v is not None}
    if spec.base is not None:
        return get_chip(spec.base).with_changes(name=spec.name, **changes)
    defaults = {"vendor": "custom", "fp8_tflops": None, "scaleup_gbps_bidir": 400.0, "nic_gbit": 200.0,
                "tdp_w": 700.0, "confidence": "user"}
    defaults.update(changes)
    return Chip(name=spec.name, **{k: v for k, v in defaults.items() if k in _CHIP_FIELDS})


def resolve(scenario: Scenario, measured: dict[str, dict] | None = None) -> Problem:
    """Turn a scenario into a :class:`Problem`.

    ``measured`` maps chip name to measured efficiency fields (``compute_efficiency``,
    ``mem_bw_efficiency``, ``interconnect_efficiency``, ``profile``) that replace the
    defaults for chips without explicit scenario overrides, and ``tables`` (measured
    latency tables, see :mod:`placer.profiles.tables`). ``None``: the scenario's own
    ``profiles:`` are read (a caller's ``measured``, e.g. the CLI's ``--profiles``, wins).
    """
    if scenario.models is not None:
        raise InputError(f"scenario {scenario.name!r} lists {len(scenario.models)} models (a fleet): this command "
                         "plans one model; `placer optimize` and `placer evaluate` plan fleets")
    # Imported here: the executor imports this module and, by tests/executor/test_imports.py,
    # loads no placer.profiles submodule.
    from placer.profiles.lookup import matching_tables
    from placer.profiles.records import measured_from_all

    chips = dict(chip_catalog())
    for spec in scenario.chips:
        chips[spec.name] = _resolve_chip(spec)
    if measured is None and scenario.profiles:
        wanted = {chip for dc in scenario.datacenters for chip in dc.inventory}
        measured = measured_from_all(scenario.profiles, chips=wanted)
    profiles_used = []
    found: list[MeasuredTable] = []
    for name, figures in (measured or {}).items():
        if name in chips:
            figures = dict(figures)
            found.extend(figures.pop("tables", []))
            chips[name] = chips[name].with_changes(**figures)
            profiles_used.append(f"{name}: {figures.get('profile', 'measured')}")

    for i, dc in enumerate(scenario.datacenters):
        for chip in dc.inventory:
            if chip not in chips:
                err = UnknownChipError(chip, sorted(chips))
                raise InputError(f"datacenters[{i}].inventory: {err}") from None

    model = get_model(scenario.model) if isinstance(scenario.model, str) else ModelConfig(
        **scenario.model.model_dump(), native_weight_dtype="bf16"
    )
    weight_dtype = scenario.weight_dtype or model.native_weight_dtype
    tables, tables_ignored = matching_tables(found, chips, model, weight_dtype, scenario.kv_dtype)

    opts = scenario.options
    rule = FilterRule(opts.filter_min_input_tokens, opts.filter_max_hit_rate, opts.filter_max_output_tokens)
    if scenario.workload.classes:
        raw = scenario.workload.classes
    else:
        from placer.workload import classes_from_trace

        raw = classes_from_trace(scenario.workload.trace, cache_tokens=scenario.workload.prefix_cache_tokens)
    classes = tuple(
        Class(
            name=c.name,
            share=c.share,
            input_tokens=c.input_tokens,
            output_tokens=c.output_tokens,
            hit_rate=c.hit_rate,
            filterable=rule.is_filtered(c.input_tokens, c.hit_rate, c.output_tokens),
            new_tokens_cv2=c.new_tokens_cv2,
            output_tokens_cv2=c.output_tokens_cv2,
        )
        for c in raw
    )
    links = {}
    for spec in scenario.links:
        for a, b in ((spec.src, spec.dst), (spec.dst, spec.src)):
            links[(a, b)] = Link(a, b, spec.gbit_per_s, spec.rtt_ms, spec.jitter_ms)

    return Problem(
        name=scenario.name,
        model=model,
        kv_dtype=scenario.kv_dtype,
        weight_dtype=weight_dtype,
        chips=chips,
        datacenters=tuple(
            Datacenter(dc.name, {k: v for k, v in dc.inventory.items() if v > 0}, dc.power_kw)
            for dc in scenario.datacenters
        ),
        links=links,
        classes=classes,
        arrival_rps=scenario.workload.arrival_rps,
        ttft_p90_s=scenario.sla.ttft_p90_s,
        tpot_s=scenario.sla.tpot_s,
        options=opts,
        profiles_used=tuple(profiles_used),
        tables=tables,
        tables_ignored=tables_ignored,
        engine=scenario.engine,
        arrival_cv2=scenario.workload.arrival_cv2,
        trace=None if scenario.workload.classes else scenario.workload.trace,
    )


@dataclass(frozen=True)
class FleetProblem:
    """A fleet: one :class:`Problem` per model (each with the fleet's name, all the datacenters,
    chips, lines and options), whose pools share the inventory, power and WAN lines."""

    name: str
    members: tuple[tuple[str, Problem], ...]  # (the model's name in the plan, its problem)

    @property
    def shared(self) -> Problem:
        """The problem whose hardware (datacenters, chips, links) and options all members share."""
        return self.members[0][1]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.members)

    def member(self, name: str) -> Problem:
        return dict(self.members)[name]


def resolve_fleet(scenario: Scenario, measured: dict[str, dict] | None = None) -> FleetProblem:
    """Turn a fleet scenario (``models:``) into a :class:`FleetProblem`: each model resolved as
    the single-model scenario :meth:`Scenario.member` gives (errors name ``models[i]``)."""
    if scenario.models is None:
        raise InputError(f"scenario {scenario.name!r} has no 'models' list: it is not a fleet")
    members = []
    for i, spec in enumerate(scenario.models):
        try:
            members.append((spec.name, resolve(scenario.member(i), measured)))
        except InputError as err:
            raise InputError(f"models[{i}] ({spec.name}): {err}") from None
    return FleetProblem(scenario.name, tuple(members))
