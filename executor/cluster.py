"""A whole PDD deployment in one process: instances, channels, link emulators, router.

In: `InstanceSpec`s (a plan's: `executor.placement.placement`), a model config and
seed, engine settings, a `ServingConfig` (routing, handoff, WAN lines, deadlines).
Out: a running `LocalCluster` with a `router` to submit requests to.

`transport="tcp"` gives every instance a real socket endpoint (in-DC: direct TCP;
cross-DC: through a `LinkEmulator` per datacenter pair) and a worker thread —
what the bench and the end-to-end tests use; the Ray deployment runs the same
`Instance` class inside actors. `transport="fake"` wires them through a
`FakeNetwork` and, with `threads=False`, lets the test pump every worker on its
own thread (`run_until`) — deterministic, no sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor.config import ServingConfig
from executor.elastic import apply_specs
from executor.engine import Engine
from executor.placement import InstanceSpec, front_datacenter, placement
from executor.registry import InstanceInfo
from executor.request_log import BatchingRequestLog
from executor.roles.a import AggregatedWorker
from executor.roles.common import RoleWorker
from executor.roles.md import MainWorker
from executor.roles.p import PrefillWorker
from executor.roles.rld import RelayWorker
from executor.router import Router
from executor.set_queues import follow_plan
from executor.transport.base import PeerInfo
from executor.transport.fake import FakeNetwork
from executor.transport.link import LinkEmulator
from executor.transport.tcp import Directory, TcpEndpoint
from placer import pdd

if TYPE_CHECKING:
    from executor.elastic import ApplyReport
    from placer.plan import Plan

ROUTER_NAME = "router"


def make_worker(role: str, name: str, engine: Any, endpoint: Any, **kw: Any) -> RoleWorker:
    """The role worker for `role` (D, the PD baselines' decode, is an MD without relay; A prefills and
    decodes on its own)."""
    cls = {pdd.P: PrefillWorker, pdd.RLD: RelayWorker, pdd.MD: MainWorker, pdd.D: MainWorker,
           pdd.AGG: AggregatedWorker}.get(role)
    if cls is None:
        raise ValueError(f"unknown role {role!r}")
    return cls(name, engine, endpoint, **kw)


@dataclass
class Instance:
    """One serving instance: its engine, endpoint and role worker."""

    spec: InstanceSpec
    worker: RoleWorker

    @classmethod
    def build(cls, spec: InstanceSpec, endpoint: Any, model_config: Any, engine_config: Any, seed: int,
              device: str = "cpu", **kw: Any) -> Instance:
        engine_config = spec.engine_config(engine_config)  # an A instance chunks its prefill
        engine = Engine.build(model_config, engine_config, seed=seed, device=device)  # a ModelConfig or a Checkpoint
        return cls(spec, make_worker(spec.role, spec.name, engine, endpoint, **kw))

    @property
    def info(self) -> InstanceInfo:
        s = self.spec
        return InstanceInfo(s.name, s.role, s.datacenter, s.chip, s.tp, getattr(self.worker.endpoint, "address", None))


class LocalCluster:
    """Instances, links and router of a deployment, all in this process."""

    def __init__(self, specs: list[InstanceSpec], model_config: Any, engine_config: Any,
                 config: ServingConfig | None = None, *, seed: int = 0, transport: str = "tcp",
                 threads: bool = True, request_log: BatchingRequestLog | None = None, device: str = "cpu",
                 link_seed: int = 0, kv_deadline_s: float = 60.0, health: Any = None,
                 link_addresses: dict[tuple[str, str], str] | None = None) -> None:
        """`config`: how it serves (default: `ServingConfig` without heartbeats — a test turns them on).
        `link_addresses`: (dc, dc) → the address of a line already running (a fleet's, shared by its
        models: `executor.fleet.local_fleet`); none given: this cluster starts its own."""
        if transport not in ("tcp", "fake"):
            raise ValueError(f"transport must be 'tcp' or 'fake', got {transport!r}")
        if transport == "tcp" and not threads:
            raise ValueError("the tcp transport needs worker threads")
        config = config or ServingConfig(heartbeat_s=None)
        self.config = config
        self.specs, self.transport, self.threads = list(specs), transport, threads
        self.model_config, self.engine_config, self.seed, self.device = model_config, engine_config, seed, device
        self.kv_deadline_s = kv_deadline_s
        self.dead: dict[str, Instance] = {}
        self.link_emulators: list[Any] = []
        self.instances: dict[str, Instance] = {}
        self.directory: Any = None
        self.network: Any = None
        if transport == "tcp":
            self._start_links(link_seed, link_addresses)
        else:
            self.network = FakeNetwork()
        try:
            router_dc = config.router_datacenter or front_datacenter(specs)
            self.router = Router(self._endpoint(ROUTER_NAME, router_dc), config, block_size=engine_config.block_size,
                                 request_log=request_log, directory=self.directory, health=health,
                                 num_blocks=engine_config.num_blocks)
            for spec in specs:
                ep = self._endpoint(spec.name, spec.datacenter)
                inst = Instance.build(spec, ep, model_config, engine_config, seed, device, kv_deadline_s=kv_deadline_s)
                self.instances[spec.name] = inst
                if threads:
                    inst.worker.start()
                self.router.register(inst.info)
        except Exception:
            self.close()
            raise

    def _start_links(self, link_seed: int, running: dict[tuple[str, str], str] | None = None) -> None:
        """The tcp transport's directory, and one `LinkEmulator` per WAN line (or the `running` ones)."""
        self.directory = Directory()
        for (a, b), addr in (running or {}).items():
            self.directory.add_link(a, b, addr)
            self.directory.add_link(b, a, addr)
        for k, (pair, shape) in enumerate(self.config.links.items() if running is None else ()):
            a, b = sorted(pair)
            emu = LinkEmulator(a, b, shape, seed=link_seed + k)
            addr = emu.start()
            self.link_emulators.append(emu)
            self.directory.add_link(a, b, addr)
            self.directory.add_link(b, a, addr)

    def _endpoint(self, name: str, datacenter: str) -> Any:
        if self.transport == "fake":
            return self.network.endpoint(name, datacenter)
        ep = TcpEndpoint(name, datacenter, self.directory)
        ep.start()
        self.directory.add(PeerInfo(name, datacenter, ep.address))
        return ep

    # ---- faults and elastic changes ----------------------------------------------------------

    def start_instance(self, spec: InstanceSpec, *, joining: bool = True) -> Instance:
        """Start (or restart, under the same name: a new endpoint, a new address) and register an instance.

        `joining`: it gets requests only once it answered a heartbeat.
        """
        ep = self._endpoint(spec.name, spec.datacenter)
        inst = Instance.build(spec, ep, self.model_config, self.engine_config, self.seed, self.device,
                              kv_deadline_s=self.kv_deadline_s)
        self.instances[spec.name] = inst
        self.dead.pop(spec.name, None)
        if spec not in self.specs:
            self.specs.append(spec)
        if self.threads:
            inst.worker.start()
        self.router.register(inst.info, joining=joining)
        return inst

    def kill(self, name: str, *, tell_router: bool = False) -> None:
        """The instance dies at once (its endpoint closes; what it held is lost).

        `tell_router`: as a supervisor that saw the process exit would (else heartbeats find out).
        """
        inst = self.instances.pop(name)
        inst.worker.stop(timeout_s=2.0)
        self.dead[name] = inst
        if tell_router:
            self.router.mark_down(name, "killed")

    def restart(self, name: str) -> Instance:
        """Start a fresh instance under a dead one's name (new endpoint, empty caches)."""
        spec = (self.dead.get(name) or self.instances[name]).spec
        if name in self.instances:
            self.kill(name)
        return self.start_instance(spec, joining=True)

    def stop_instance(self, name: str) -> None:
        """Stop a drained instance and forget it."""
        inst = self.instances.pop(name, None)
        self.router.unregister(name)
        if inst is not None:
            inst.worker.stop(timeout_s=2.0)
        self.specs = [s for s in self.specs if s.name != name]

    def apply_plan(self, new: Plan | list[InstanceSpec], *, grace_s: float = 30.0, ready_timeout_s: float = 30.0,
                   max_per_pool: int | None = None) -> ApplyReport:
        """Diff the running instances against a plan (or a list of specs) and apply it (`executor.elastic`)."""
        specs = new if isinstance(new, list) else placement(new, max_per_pool)
        report = apply_specs(self, specs, grace_s=grace_s, ready_timeout_s=ready_timeout_s)
        if not isinstance(new, list) and report.failed is None:
            follow_plan(self, new)  # the router dispatches by the new plan's P queues
        return report

    # ---- driving without threads (fake transport) ------------------------------------------

    def pump(self) -> bool:
        """One `run_once` on every worker; whether any did something."""
        return any([inst.worker.run_once() for inst in self.instances.values()])  # noqa: C419 - run them all

    def settle(self, max_rounds: int = 10_000) -> None:
        """Pump (no threads) until no worker has anything left to do."""
        for _ in range(max_rounds):
            if not self.pump():
                return
        raise TimeoutError("workers still busy after max_rounds")

    def run_until(self, done: Callable[[], bool], timeout_s: float = 60.0) -> None:
        end = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > end:
                raise TimeoutError("cluster did not reach the condition in time")
            if self.threads:
                time.sleep(0.005)
            elif not self.pump():
                time.sleep(0.001)

    def worker(self, name: str) -> RoleWorker:
        return self.instances[name].worker

    def workers(self, role: str) -> list[RoleWorker]:
        return [i.worker for i in self.instances.values() if i.spec.role == role]

    def stats(self) -> dict[str, Any]:
        return {"router": self.router.stats(),
                "instances": {n: i.worker.stats() for n, i in self.instances.items()},
                "links": {f"{e.dc_a}<->{e.dc_b}": e.stats() for e in self.link_emulators}}

    def close(self) -> None:
        for inst in list(self.instances.values()):
            inst.worker.stop()
        if hasattr(self, "router"):
            self.router.close()
        for emu in self.link_emulators:
            emu.close()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
