"""Deploy a plan on Ray: every pool's instances as actors, placed by datacenter and chip.

In: a plan, its `ServingConfig`, a Ray address (or none: start a local Ray that
emulates the plan's datacenters as custom resources on this machine). Out: a
`RayDeployment` — one `InstanceActor` per instance (engine + socket endpoint + role
worker, pinned with the custom resources `dc:<datacenter>` = 1 and `chip:<chip>` =
tp, claiming `num_gpus` when it runs on CUDA: `executor.devices`), one `LinkActor`
per datacenter pair (the shaped WAN line), and the router in this (the driver's)
process, with every instance registered. `describe` (`executor.describe`) renders the placement for `--dry-run`; `serve` runs a deployment behind the HTTP endpoint until
interrupted (`placer deploy`); a new plan for a running one's server goes through
`executor.plan_client` (`placer deploy --apply`).

Startup: actors start and report their addresses; the driver builds the directory
(instances, router, links) and pushes it to every actor; then the router registers
each instance. A real cluster's nodes are started with the matching resources, e.g.
`ray start --resources='{"dc:dc-a": 8, "chip:H800-SXM": 64}'`.

Importing this module needs neither ray nor torch nor the HTTP stack: ray comes in
inside the functions that start or talk to actors, torch only inside the actors,
uvicorn/FastAPI inside `serve` (the `placer` command line imports this module).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.config import ServingConfig
from executor.devices import Runtime, place_on_devices, resolve_runtime
from executor.elastic import ApplyReport, apply_specs
from executor.engine.config import EngineConfig, ModelConfig
from executor.placement import InstanceSpec, datacenters, dc_resource, front_datacenter, node_resources, placement
from executor.registry import InstanceInfo
from executor.request_log import BatchingRequestLog, open_sink
from executor.router import Router
from executor.set_queues import follow_plan
from executor.transport.base import PeerInfo
from executor.transport.link import LinkEmulator
from executor.transport.shaping import LinkShape
from executor.transport.tcp import Directory, TcpEndpoint

if TYPE_CHECKING:
    from placer.plan import Plan

DEFAULT_OBJECT_STORE_BYTES = 128 * 1024 * 1024
# a loaded host can keep the raylet past Ray's fixed 30 s to register; a second start usually succeeds
START_ATTEMPTS = 2
log = logging.getLogger(__name__)


def actor_classes():
    """The Ray actor classes (built on first use so importing this module needs no ray)."""
    import ray

    @ray.remote(num_cpus=0)
    class InstanceActor:
        def __init__(self, spec: dict, model_config: dict, engine_config: dict, seed: int,
                     model_file: str | None = None, model_dir: str | None = None, runtime: dict | None = None) -> None:
            import torch  # engines run in the actors' processes only

            from executor.cluster import Instance, make_worker

            torch.set_num_threads(1)
            self.spec = InstanceSpec(**spec)
            self.directory = Directory()
            host = ray.util.get_node_ip_address()
            ep = TcpEndpoint(self.spec.name, self.spec.datacenter, self.directory, host=host)
            ep.start()
            settings = self.spec.engine_config(EngineConfig(**engine_config))  # A: chunked prefill
            engine = _build_engine(model_config, settings, seed, model_file, model_dir,
                                   Runtime(**runtime) if runtime else Runtime())
            self.instance = Instance(self.spec, make_worker(self.spec.role, self.spec.name, engine, ep))
            self.instance.worker.start()

        def address(self) -> str:
            return self.instance.worker.endpoint.address

        def node_id(self) -> str:
            return ray.get_runtime_context().get_node_id()

        def set_directory(self, data: dict) -> None:
            self.directory.load(data)

        def stats(self) -> dict:
            return self.instance.worker.stats()

    @ray.remote(num_cpus=0)
    class LinkActor:
        def __init__(self, dc_a: str, dc_b: str, shape: dict, seed: int) -> None:
            self.emu = LinkEmulator(dc_a, dc_b, LinkShape(**shape), host=ray.util.get_node_ip_address(), seed=seed)
            self.emu.start()

        def address(self) -> str:
            return self.emu.address

        def stats(self) -> dict:
            return self.emu.stats()

    return InstanceActor, LinkActor


def _build_engine(model_config: dict, engine_config: EngineConfig, seed: int, model_file: str | None,
                  model_dir: str | None, runtime: Runtime) -> Any:
    """An actor's engine: a Hugging Face directory, an `Engine.save` file, or the seeded model, on the
    runtime's device in its dtype (Ray has set CUDA_VISIBLE_DEVICES to the GPUs the actor claimed)."""
    from executor.engine import Engine

    if model_dir:
        return Engine.from_pretrained(model_dir, engine_config, device=runtime.device, dtype=runtime.dtype)
    if model_file:
        return Engine.from_file(model_file, engine_config, device=runtime.device, dtype=runtime.dtype)
    mc = dataclasses.replace(ModelConfig(**model_config), dtype=runtime.dtype)
    return Engine.from_seed(mc, engine_config, seed=seed, device=runtime.device)


def start_local_ray(specs: list[InstanceSpec], num_cpus: int | None = None,
                    object_store_bytes: int = DEFAULT_OBJECT_STORE_BYTES, datacenters: list[str] = ()) -> None:
    """A local Ray whose one node carries every datacenter's and chip's custom resources. ``datacenters``:
    the plan's datacenters, its links' ends included; each may host as many instances as the plan has in
    all (the chips stay the plan's), so a later plan may move instances to a datacenter the first plan left
    empty — a replanning job's change applies on the emulated cluster as on a real one with room there."""
    import ray

    resources: dict[str, float] = {}
    for res in node_resources(specs).values():
        for k, v in res.items():
            resources[k] = resources.get(k, 0.0) + v
    slots = sum(v for k, v in resources.items() if k.startswith("dc:"))
    for dc in datacenters:
        resources[dc_resource(dc)] = max(resources.get(dc_resource(dc), 0.0), slots)
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            ray.init(num_cpus=num_cpus, resources=resources, include_dashboard=False,
                     object_store_memory=object_store_bytes, ignore_reinit_error=True, log_to_driver=False)
            return
        except Exception as e:  # Ray raises a bare Exception when its raylet misses its fixed 30 s to register
            if "timed out during startup" not in str(e) or attempt == START_ATTEMPTS:
                raise
            log.warning("local Ray did not start (%s); starting it again (attempt %d of %d)",
                        e, attempt + 1, START_ATTEMPTS)
            ray.shutdown()


class RayDeployment:
    """A plan running on Ray: instance actors, link actors, and the router here."""

    def __init__(self, plan: Plan, model_config: ModelConfig, engine_config: EngineConfig,
                 config: ServingConfig | None = None, *,
                 seed: int = 0, max_per_pool: int | None = None, request_log: Any = None,
                 model_file: str | None = None, model_dir: str | None = None, runtime: Runtime | None = None,
                 start_timeout_s: float = 180.0, specs: list[InstanceSpec] | None = None,
                 link_addresses: dict[tuple[str, str], str] | None = None) -> None:
        """`config`: how it serves (default: `ServingConfig.from_plan(plan)`). `model_dir`: a Hugging Face
        checkpoint directory every node can read. `runtime`: backend, device, dtype (default: the engine
        config's backend on the CPU; device "auto" is decided here from the cluster's GPUs) — its backend
        is the one the engines use. A fleet's model (`executor.fleet_deploy`) passes its `specs`, already
        placed on devices with the other models', and the `link_addresses` of the lines they share
        (this deployment then starts no line of its own)."""
        import ray

        if not ray.is_initialized():
            raise RuntimeError("start Ray first (ray.init, or start_local_ray)")
        self.plan = plan
        self.config = config or ServingConfig.from_plan(plan)
        cluster_gpus = ray.cluster_resources().get("GPU", 0.0)
        # default: the engine config's backend on the CPU (as before devices were chosen)
        runtime = runtime or Runtime(backend=engine_config.backend, interpret=engine_config.backend == "triton")
        if runtime.device == "auto":
            runtime = resolve_runtime(runtime.backend, "auto", int(cluster_gpus))
        self.runtime = runtime
        engine_config = dataclasses.replace(engine_config, backend=runtime.backend)  # the runtime decides
        self.specs = specs if specs is not None else place_on_devices(placement(plan, max_per_pool), runtime,
                                                                       cluster_gpus)
        self._shared_links = link_addresses
        self._gpu_claim = {s.name: s.num_gpus for s in self.specs}
        self.start_timeout_s, self.max_per_pool = start_timeout_s, max_per_pool
        self._actor_args = (dataclasses.asdict(model_config), dataclasses.asdict(engine_config), seed, model_file,
                            model_dir, dataclasses.asdict(runtime))
        addresses, link_addrs = self._start_actors()
        front = self.config.router_datacenter or front_datacenter(plan)
        self.directory = Directory()
        self.endpoint = TcpEndpoint("router", front, self.directory, host=ray.util.get_node_ip_address())
        self.endpoint.start()
        self.directory.add(PeerInfo("router", front, self.endpoint.address))
        for s in self.specs:
            self.directory.add(PeerInfo(s.name, s.datacenter, addresses[s.name]))
        for (a, b), addr in link_addrs.items():
            self.directory.add_link(a, b, addr)
            self.directory.add_link(b, a, addr)
        ray.get([a.set_directory.remote(self.directory.to_dict()) for a in self.actors.values()])
        self.router = Router(self.endpoint, self.config, block_size=engine_config.block_size,
                             request_log=request_log, directory=self.directory, num_blocks=engine_config.num_blocks)
        for s in self.specs:
            self.router.register(InstanceInfo(s.name, s.role, s.datacenter, s.chip, s.tp, addresses[s.name]))

    def _start_actors(self) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
        """An actor per instance and per WAN line; their addresses once they are up."""
        import ray

        InstanceActor, LinkActor = actor_classes()
        self.actors = {s.name: InstanceActor.options(**self._actor_options(s)).remote(
            dataclasses.asdict(s), *self._actor_args) for s in self.specs}
        self.link_actors = {}
        seed = self._actor_args[2]
        if self._shared_links is not None:  # a fleet's lines, started once for every model
            addresses = dict(zip(self.actors, ray.get([a.address.remote() for a in self.actors.values()],
                                                      timeout=self.start_timeout_s)))
            return addresses, dict(self._shared_links)
        for k, (pair, shape) in enumerate(self.config.links.items()):
            a, b = sorted(pair)
            self.link_actors[(a, b)] = LinkActor.remote(a, b, dataclasses.asdict(shape), seed + k)
        addresses = dict(zip(self.actors, ray.get([a.address.remote() for a in self.actors.values()],
                                                  timeout=self.start_timeout_s)))
        link_addrs = dict(zip(self.link_actors, ray.get([a.address.remote() for a in self.link_actors.values()],
                                                        timeout=self.start_timeout_s)))
        return addresses, link_addrs

    def _actor_options(self, spec: InstanceSpec) -> dict[str, Any]:
        """Ray options of an instance's actor: its custom resources, its GPUs on CUDA (a spec of a new plan
        claims what its pool's instances claim, else its tp), Triton's interpreter where asked for."""
        options: dict[str, Any] = {"resources": spec.resources}
        env: dict[str, str] = {}
        if self.runtime.device == "cuda" and spec.gpu_ids:  # a fleet's model on its own GPUs (Ray assigns none)
            options["num_gpus"] = 0
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, spec.gpu_ids))
            env["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] = "0"  # Ray must keep that pin on a 0-GPU actor
        elif self.runtime.device == "cuda":
            pool = (spec.role, spec.datacenter, spec.chip, spec.tp)
            same_pool = [s.num_gpus for s in self.specs if (s.role, s.datacenter, s.chip, s.tp) == pool]
            options["num_gpus"] = (self._gpu_claim.get(spec.name) or (same_pool[0] if same_pool else 0.0)
                                   or spec.num_gpus or float(spec.tp))
        if self.runtime.interpret:
            env["TRITON_INTERPRET"] = "1"
        if env:
            options["runtime_env"] = {"env_vars": env}
        return options

    # ---- faults and elastic changes (the same surface as `LocalCluster`) ---------------------

    def start_instance(self, spec: InstanceSpec, *, joining: bool = True) -> None:
        """Start an actor for `spec` (a new one, or a restart under a known name: a new address),
        tell every instance where it is, and let it join the router once it answers."""
        import ray

        InstanceActor, _ = actor_classes()
        actor = InstanceActor.options(**self._actor_options(spec)).remote(dataclasses.asdict(spec), *self._actor_args)
        try:
            address = ray.get(actor.address.remote(), timeout=self.start_timeout_s)
        except Exception:  # e.g. GetTimeoutError: no free chips; a pending actor must not start later
            ray.kill(actor)
            raise
        self.actors[spec.name] = actor
        if spec not in self.specs:
            self.specs = [s for s in self.specs if s.name != spec.name] + [spec]
        self.directory.add(PeerInfo(spec.name, spec.datacenter, address))
        ray.get([a.set_directory.remote(self.directory.to_dict()) for a in self.actors.values()],
                timeout=self.start_timeout_s)
        self.router.register(InstanceInfo(spec.name, spec.role, spec.datacenter, spec.chip, spec.tp, address),
                             joining=joining)

    def kill(self, name: str, *, tell_router: bool = True) -> None:
        """Kill an instance's actor (its process dies; the router hears of it unless told not to)."""
        import ray

        ray.kill(self.actors.pop(name))
        if tell_router:
            self.router.mark_down(name, "actor killed")

    def restart(self, name: str) -> None:
        spec = next(s for s in self.specs if s.name == name)
        if name in self.actors:
            self.kill(name)
        self.start_instance(spec)

    def stop_instance(self, name: str) -> None:
        import ray

        self.router.unregister(name)
        actor = self.actors.pop(name, None)
        if actor is not None:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001, S110 - already gone
                pass
        self.specs = [s for s in self.specs if s.name != name]

    def free_resources(self) -> dict[str, float]:
        """The datacenter and chip resources no actor holds now (`executor.elastic.choose_strategy`)."""
        import ray

        return {k: v for k, v in ray.available_resources().items() if k.startswith(("dc:", "chip:"))}

    def apply_plan(self, new: Plan | list[InstanceSpec], *, grace_s: float = 30.0, ready_timeout_s: float = 120.0,
                   timeout_s: float | None = None) -> ApplyReport:
        """Diff against a plan (or specs) and apply it live (`executor.elastic`); the plan is
        recorded as running only when the change succeeded."""
        specs = new if isinstance(new, list) else placement(new, self.max_per_pool)
        report = apply_specs(self, specs, grace_s=grace_s, ready_timeout_s=ready_timeout_s, timeout_s=timeout_s)
        if not isinstance(new, list) and report.failed is None:
            follow_plan(self, new)
        return report

    def node_of(self) -> dict[str, str]:
        """Instance name → the Ray node it runs on."""
        import ray

        return dict(zip(self.actors, ray.get([a.node_id.remote() for a in self.actors.values()])))

    def stats(self) -> dict[str, Any]:
        import ray

        return {"router": self.router.stats(),
                "instances": dict(zip(self.actors, ray.get([a.stats.remote() for a in self.actors.values()]))),
                "links": {f"{a}<->{b}": s for (a, b), s in zip(self.link_actors, ray.get(
                    [x.stats.remote() for x in self.link_actors.values()]))}}

    def close(self) -> None:
        import ray

        self.router.close()
        for actor in [*self.actors.values(), *self.link_actors.values()]:
            try:
                ray.kill(actor)
            except Exception:  # already gone
                pass


def checkpoint_text(model_dir: str | None, config: ServingConfig) -> tuple[Any, ServingConfig]:
    """A served checkpoint's tokenizer (None: the tiny model's bytes) and `config` admitting requests
    within its context (`max_position_embeddings`): text in and out with the checkpoint's tokenizer."""
    if not model_dir:
        return None, config
    from executor.engine.hf import read_json
    from executor.engine.hf_tokenizer import HFTokenizer

    context = read_json(Path(model_dir) / "config.json").get("max_position_embeddings")
    if isinstance(context, int) and context > 0:
        config = dataclasses.replace(config, admission=dataclasses.replace(config.admission,
                                                                           max_context_tokens=context))
    return HFTokenizer.from_dir(model_dir), config


def serve(plan: Plan, config: ServingConfig, engine_config: EngineConfig, *, address: str | None = None,
          seed: int = 0, max_per_pool: int | None = None, model_file: str | None = None,
          model_dir: str | None = None, runtime: Runtime | None = None,
          request_log: str | None = None, host: str = "127.0.0.1", port: int = 8000,
          echo: Callable[[str], None] = print, token: str | None = None,
          protect_completions: bool = False) -> None:
    """Deploy `plan` on Ray and serve its completions endpoint on `host:port` until interrupted.

    `address`: a running Ray cluster ('auto' or ADDR); None starts a local Ray that emulates the
    plan's datacenters. `model_dir` / `model_file`: the served weights (default: the tiny seeded
    model); `runtime`: backend, device, dtype (`executor.devices`). `request_log`: a sink
    (`executor.request_log.open_sink`). Ray is shut down on the way out. `token`: the control
    plane's bearer token (None: locked); `protect_completions`: completions need it too
    (`executor.server.create_app`).
    """
    import ray

    from executor.server import create_app
    from placer.service.http import serve as serve_http  # header deadline, connection caps

    if address is None:
        start_local_ray(placement(plan, max_per_pool), datacenters=datacenters(plan))
    else:
        ray.init(address=address, log_to_driver=False)
    dep = None
    try:
        sink = BatchingRequestLog(open_sink(request_log)) if request_log else None
        tokenizer, config = checkpoint_text(model_dir, config)
        model_name = Path(model_dir).name if model_dir else "placer-tiny"
        dep = RayDeployment(plan, ModelConfig(), engine_config, config, seed=seed, max_per_pool=max_per_pool,
                            request_log=sink, model_file=model_file, model_dir=model_dir, runtime=runtime)
        echo(f"engines: {dep.runtime.describe()}")
        echo(f"serving on http://{host}:{port}/v1/completions (Ctrl-C stops)")
        serve_http(create_app(dep.router, model_name=model_name, deployment=dep, token=token,
                               protect_completions=protect_completions, tokenizer=tokenizer),
                    host=host, port=port, log_level="warning")
    finally:
        if dep is not None:
            dep.close()
        ray.shutdown()
