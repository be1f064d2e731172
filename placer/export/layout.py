"""A plan as the engines see it: named pools, their nodes and devices, and the routers.

in:  a :class:`~placer.plan.Plan`, :class:`ExportSettings` (model, dtypes, DRC, chips per
     node; from the CLI and, when given, the scenario) and optionally the resolved
     :class:`~placer.problem.Problem` (to quantify what a fallback costs)
out: :class:`Layout`: the pools an operator deploys, the routers in front of them, and the
     caveats — the PDD parts no engine expresses and what their traffic becomes.

The rules (one home; every format module reads them from here):

* Engines know two roles: ``prefill`` (P) and ``decode`` (MD, D, and RLD when it is kept).
* Pipelines become PD pairs: P-MD and P-D stay; **P-RLD-MD → P-MD across the same WAN
  line** (no engine relays: the first token waits for the KV over the WAN, the token-ID
  handoff and extend-decode vanish); **P-RLD (filtered traffic) → same-datacenter P-D**
  with the RLD pool as a plain decode pool behind its own router, because an engine's
  router cannot tell a filtered request from another (the client or gateway must send
  the filtered classes there).
* An RLD pool is deployed only when some P-RLD traffic needs it; otherwise its chips are
  freed (the README says how many).
* One router per (entry datacenter, decode datacenter, decode role), placed in the entry
  datacenter: its prefill list is that datacenter's P pools, its decode list the pools of
  that role in the decode datacenter; its share of the traffic is the plan's route rps.
* Names from the plan become folders, Kubernetes names and labels only through
  :mod:`placer.export.names` (a safe slug per datacenter and per chip, no two alike): the
  pools' ``dc_label``/``chip_label`` and the routers' ``src_label``/``dst_label``.
* An instance of tp chips spans ``ceil(tp / chips_per_node)`` nodes; tp must then be a
  multiple of chips_per_node. Its shape (plan ``shape``: tp, pp, dep) picks the engines'
  parallel flags (:func:`placer.export.commands.parallel_args`) and names the pool (``tp8-dep``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from placer.catalog import chip_catalog
from placer.errors import InputError
from placer.export.names import distinct_slugs, slug
from placer.flows import Route
from placer.pdd import MD, P, P_MD, P_RLD, P_RLD_MD, RLD
from placer.plan import Plan
from placer.shapes import TP, kind_of


@dataclass(frozen=True)
class Vendor:
    """How one chip vendor's accelerators appear to the engines and to Kubernetes."""

    k8s_resource: str  # the device plugin's extended resource
    sglang_device: str | None  # --device (None: the engine's auto-detection, CUDA/ROCm)
    sglang_transfer_backend: str  # --disaggregation-transfer-backend
    vllm_connector: str  # kv_connector of --kv-transfer-config
    note: str = ""


VENDORS: dict[str, Vendor] = {
    "NVIDIA": Vendor("nvidia.com/gpu", None, "mooncake", "NixlConnector"),
    "AMD": Vendor("amd.com/gpu", None, "mori", "NixlConnector",
                  "AMD: run the engines' ROCm images; SGLang's PD transfer uses MORI."),
    "Huawei": Vendor("huawei.com/Ascend910", "npu", "ascend", "MooncakeConnector",
                     "Ascend: SGLang runs with --device npu and the ascend transfer backend; vLLM needs the "
                     "vllm-ascend plugin image."),
    "Intel": Vendor("habana.ai/gaudi", "hpu", "nixl", "NixlConnector",
                    "Gaudi: SGLang runs with --device hpu; vLLM needs the vllm-gaudi plugin image; check that "
                    "your engine build supports PD disaggregation on HPU before relying on it."),
}
ASSUMED_VENDOR = "NVIDIA"  # a chip the catalog does not know and no scenario describes

PREFILL, DECODE = "prefill", "decode"
SERVER_PORT = 30000
BOOTSTRAP_PORT = 8998  # SGLang's prefill bootstrap server
DIST_PORT = 5000  # multi-node torch.distributed rendezvous on the instance's first node
ROUTER_PORT = 8000


@dataclass(frozen=True)
class ExportSettings:
    """What the engines are told beyond the plan."""

    model: str  # a local checkpoint directory or a Hugging Face name, passed to the engines as is
    served_model_name: str
    kv_dtype: str | None = None  # "bf16" | "fp8"; None: the engine's "auto"
    weight_dtype: str | None = None  # "bf16" | "fp8"; None: the checkpoint's own
    native_weight_dtype: str | None = None  # the model's own weight dtype, when known
    drc: bool = True  # decode-side radix cache (the scenario's options.drc)
    chips_per_node: int = 8
    chip_vendors: dict[str, str] = field(default_factory=dict)  # scenario chips: name -> vendor of its base
    #: fleets: the model's slug before every host name (``chat-dc-a-p-…-0``), so that two models' scripts
    #: never name the same machine; "" for a single-model plan (its names do not change)
    host_prefix: str = ""


@dataclass(frozen=True)
class Pool:
    """One plan pool as deployed: ``count`` instances of ``tp`` chips over ``nodes`` nodes each.

    ``tp`` is the plan row's pool key element: a :class:`~placer.shapes.Shape` when the row names
    its ``shape`` (its f-string label, e.g. ``8-dep``, names the pool), a plain ``int`` when not."""

    datacenter: str
    plan_role: str
    chip: str
    tp: int
    count: int
    vendor_name: str
    nodes: int
    dc_label: str  # the datacenter's slug: its folder and node label (placer.export.names)
    chip_label: str  # the chip's slug: its node label
    host_prefix: str = ""  # ExportSettings.host_prefix

    @property
    def engine_role(self) -> str:
        return PREFILL if self.plan_role == P else DECODE

    @property
    def kind(self) -> str:
        """The instance shape (``tp`` | ``pp`` | ``dep``); a row without ``shape`` launches as ``tp``."""
        return kind_of(self.tp) or TP

    @property
    def vendor(self) -> Vendor:
        return VENDORS[self.vendor_name]

    @property
    def chips_per_node(self) -> int:
        return self.tp // self.nodes

    @property
    def name(self) -> str:
        return slug(f"{self.plan_role}-{self.chip_label}-tp{self.tp}")

    def host(self, instance: int, node: int = 0) -> str:
        """The DNS name operators give node ``node`` of instance ``instance`` (k8s: the pod's)."""
        prefix = f"{self.host_prefix}-" if self.host_prefix else ""
        return slug(f"{prefix}{self.dc_label}-{self.name}-{instance}") + (f"-node{node}" if node else "")


@dataclass(frozen=True)
class Router:
    """A PD router: requests enter in ``src``, prefill there, decode in ``dst``."""

    src: str
    dst: str
    decode_role: str
    prefill: tuple[Pool, ...]
    decode: tuple[Pool, ...]
    rps: float
    classes: tuple[str, ...]
    src_label: str  # the datacenters' slugs (placer.export.names)
    dst_label: str
    host_prefix: str = ""  # ExportSettings.host_prefix

    @property
    def host(self) -> str:
        """The DNS name operators give the router's machine: its name (a fleet: after the model's slug)."""
        return slug(f"{self.host_prefix}-{self.name}") if self.host_prefix else self.name

    @property
    def name(self) -> str:
        return slug(f"router-{self.src_label}-to-{self.dst_label}" + ("-filtered" if self.decode_role == RLD else ""))


@dataclass(frozen=True)
class Layout:
    plan: Plan
    settings: ExportSettings
    pools: tuple[Pool, ...]  # deployed pools
    routers: tuple[Router, ...]
    caveats: tuple[str, ...]  # engine-independent: what PDD does that this deployment does not
    dc_labels: dict[str, str] = field(default_factory=dict)  # datacenter → its slug (placer.export.names)

    def folder(self, datacenter: str) -> str:
        """The datacenter's folder in the export (and its node label): its slug, never a path."""
        return self.dc_labels[datacenter]

    @property
    def datacenters(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([p.datacenter for p in self.pools] + [r.src for r in self.routers]))


def vendor_of(chip: str, settings: ExportSettings) -> str:
    known = settings.chip_vendors.get(chip) or (chip_catalog()[chip].vendor if chip in chip_catalog() else None)
    return known if known in VENDORS else ASSUMED_VENDOR


def nodes_of(tp: int, chips_per_node: int, where: str) -> int:
    if tp <= chips_per_node:
        return 1
    if tp % chips_per_node:
        raise InputError(f"{where}: tp {tp} spans several nodes but is not a multiple of --chips-per-node "
                         f"{chips_per_node}")
    return tp // chips_per_node


def _engine_pairs(plan: Plan) -> dict[tuple[str, str, str], list]:
    """(entry dc, decode dc, decode role) → the plan's routes that become that PD pair."""
    pairs: dict[tuple[str, str, str], list] = defaultdict(list)
    for route in plan.routes:
        if route.rps <= 0:
            continue
        if route.pipeline == P_RLD:
            pairs[(route.src, route.src, RLD)].append(route)
        elif route.pipeline in (P_MD, P_RLD_MD):
            pairs[(route.src, route.dst, MD)].append(route)
        else:  # P-D
            pairs[(route.src, route.dst, "D")].append(route)
    return pairs


def build_layout(plan: Plan, settings: ExportSettings, problem=None) -> Layout:
    """The deployment of ``plan`` (see the module docstring for the rules)."""
    if settings.chips_per_node < 1:
        raise InputError(f"--chips-per-node must be at least 1 (got {settings.chips_per_node})")
    pairs = _engine_pairs(plan)
    dcs = distinct_slugs([*(p.datacenter for p in plan.pools), *(r.src for r in plan.routes),
                          *(r.dst for r in plan.routes)], "datacenter")
    chips = distinct_slugs((p.chip for p in plan.pools), "chip")
    rld_needed = {src for (src, _, role) in pairs if role == RLD}
    pools, caveats = [], []
    for i, p in enumerate(plan.pools):
        if p.count == 0:
            continue
        if p.role == RLD and p.datacenter not in rld_needed:
            continue
        nodes = nodes_of(p.tp, settings.chips_per_node, f"pools[{i}] ({p.role} {p.chip} in {p.datacenter})")
        pools.append(Pool(p.datacenter, p.role, p.chip, p.tp, p.count, vendor_of(p.chip, settings), nodes,
                          dcs[p.datacenter], chips[p.chip], settings.host_prefix))
    routers = []
    for (src, dst, role), routes in sorted(pairs.items()):
        prefill = tuple(x for x in pools if x.plan_role == P and x.datacenter == src)
        decode = tuple(x for x in pools if x.plan_role == role and x.datacenter == dst)
        if not prefill or not decode:
            missing = f"P pool in {src}" if not prefill else f"{role} pool in {dst}"
            raise InputError(f"routes: traffic {src}->{dst} ({routes[0].pipeline}) has no deployed {missing}")
        routers.append(Router(src, dst, role, prefill, decode, sum(r.rps for r in routes),
                              tuple(dict.fromkeys(r.request_class for r in routes)), dcs[src], dcs[dst],
                              settings.host_prefix))
    caveats += _relay_caveats(plan, settings, problem)
    caveats += _vendor_caveats(routers)
    return Layout(plan, settings, tuple(pools), tuple(routers), tuple(caveats), dcs)


def _relay_caveats(plan: Plan, settings: ExportSettings, problem) -> list[str]:
    """What the fallbacks of the relay pipelines and the filter cost, in the plan's own terms."""
    out = []
    relayed = [r for r in plan.routes if r.pipeline == P_RLD_MD and r.rps > 0]
    if relayed:
        lines = []
        for r in relayed:
            lines.append(f"`{r.request_class}` {r.rps:.3g} req/s {r.src}->{r.dst}" + _wan_wait(problem, plan, r, settings))
        out.append("**Relay decode (RLD) and the token-ID handoff have no engine counterpart.** P-RLD-MD traffic "
                   "runs as P-MD over the same WAN line: the first token now waits for the (DRC-trimmed) KV to "
                   "cross the WAN instead of an RDMA copy to RLD, so the TTFT the relay bought is lost; MD no "
                   "longer rebuilds RLD's tokens with an extend-decode pass (the handoff policy "
                   f"`{plan.handoff.mode}`, catch-up above {plan.handoff.catch_up_threshold_tokens} tokens, is "
                   "unused). Rerouted: " + "; ".join(lines) + "."
                   + (f" The SLA's P90 TTFT is {problem.ttft_p90_s:g} s." if problem is not None else ""))
    dropped = [p for p in plan.pools if p.role == RLD and p.count > 0
               and not any(r.pipeline == P_RLD and r.src == p.datacenter and r.rps > 0 for r in plan.routes)]
    if dropped:
        chips = sum(p.count * p.tp for p in dropped)
        out.append("RLD pools not deployed (they only relayed): " + ", ".join(
            f"{p.count}x {p.chip} tp{p.tp} in {p.datacenter}" for p in dropped) + f" — {chips} chips freed.")
    filtered = [r for r in plan.routes if r.pipeline == P_RLD and r.rps > 0]
    if filtered:
        out.append("**The anomalous-traffic filter has no engine counterpart.** Filtered traffic (P-RLD: " + "; ".join(
            f"`{r.request_class}` {r.rps:.3g} req/s in {r.src}" for r in filtered) + ") runs as same-datacenter P-D "
            "with the RLD pool as a plain decode pool behind the `-filtered` router: the engines cannot classify "
            "a request, so your gateway must send these classes (long input, low hit, short output) there; "
            "anything else sent there overloads that pool.")
    out.append("Engine routers are class-blind: they balance by their own policy, not by the plan's per-class "
               "split. Send each router the share of traffic the Routers table gives it.")
    return out


def _wan_wait(problem, plan: Plan, route, settings: ExportSettings) -> str:
    """`` (first token waits X s for the WAN)`` from the flow physics, when the scenario is known."""
    if problem is None:
        return ""
    cls = next((c for c in problem.classes if c.name == route.request_class), None)
    if cls is None:
        return ""
    link = next((lk for lk in plan.links if (lk.src, lk.dst) in ((route.src, route.dst), (route.dst, route.src))), None)
    util = link.gbit_per_s_used / link.gbit_per_s_capacity if link and link.gbit_per_s_capacity else 0.0
    # the line at the plan's own load (capped below 1, where the queueing factor of the WAN law diverges)
    seconds = Route(problem, cls, P_MD, route.src, route.dst, settings.drc).wan_s(min(util, 0.95))
    return "" if math.isinf(seconds) else f" (first token now waits {seconds:.2f} s for the WAN transfer)"


def _vendor_caveats(routers: list[Router]) -> list[str]:
    out = []
    for r in routers:
        vendors = {p.vendor_name for p in r.prefill} | {p.vendor_name for p in r.decode}
        if len(vendors) > 1:
            out.append(f"`{r.name}` pairs {' and '.join(sorted(vendors))} chips: no engine's KV transfer "
                       "moves a KV cache between different vendors' devices (different transfer backends and "
                       "KV layouts); this pair needs a common transfer path or same-vendor chips.")
    return out
