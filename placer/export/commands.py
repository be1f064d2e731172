"""The engines' command lines for a :class:`~placer.export.layout.Layout`.

in:  a Layout; out: :class:`Command` objects (argv, where it runs, which parser checks it).

* SGLang server (``python -m sglang.launch_server``): ``--disaggregation-mode prefill|decode``,
  the vendor's ``--disaggregation-transfer-backend`` and ``--device``, the shape's parallel flags
  (:func:`parallel_args`),
  ``--nnodes/--node-rank/--dist-init-addr`` when an instance spans nodes,
  ``--disaggregation-bootstrap-port`` on prefill, ``--disaggregation-decode-enable-radix-cache``
  on decode when the plan counts on DRC, the dtypes of :func:`dtype_args`.
* SGLang router (``python -m sglang_router.launch_router --pd-disaggregation``): one
  ``--prefill URL BOOTSTRAP_PORT`` per prefill instance, one ``--decode URL`` per decode
  instance.
* vLLM server (``vllm serve MODEL``): ``--kv-transfer-config`` with the vendor's connector and
  ``kv_role`` ``kv_producer`` (prefill) / ``kv_consumer`` (decode), the shape's parallel flags,
  ``--nnodes/--node-rank/--master-addr`` (``--headless`` on the other nodes), prefix caching on
  decode exactly when the plan counts on DRC.
* vLLM proxy: vLLM ships no PD router in its package; the command is the proxy of vLLM's
  own NIXL example (``toy_proxy_server.py``), checked by nobody's parser (``parser=None``).

``Command.parser`` names the engine parser the tests run the argv through
(tests/placer/export/engine_parsers.py): ``sglang``, ``sglang-router``, ``vllm``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from placer.export.layout import (BOOTSTRAP_PORT, DECODE, DIST_PORT, PREFILL, ROUTER_PORT, SERVER_PORT, Layout, Pool,
                                  Router)
from placer.shapes import DEP, PP, SCALEUP_DOMAIN_CHIPS

SGLANG_SERVER = ("python3", "-m", "sglang.launch_server")
SGLANG_ROUTER = ("python3", "-m", "sglang_router.launch_router")
VLLM_SERVE = ("vllm", "serve")
VLLM_PROXY = ("python3", "toy_proxy_server.py")
VLLM_PORT = 8100


@dataclass(frozen=True)
class Command:
    datacenter: str
    unit: str  # the pool's or the router's name
    instance: int | None
    node: int | None
    host: str
    program: tuple[str, ...]
    args: tuple[str, ...]
    parser: str | None

    @property
    def argv(self) -> tuple[str, ...]:
        return self.program + self.args

    def to_dict(self) -> dict:
        return {"datacenter": self.datacenter, "unit": self.unit, "instance": self.instance, "node": self.node,
                "host": self.host, "program": list(self.program), "args": list(self.args), "parser": self.parser}


#: the plan's KV dtype in each engine's --kv-cache-dtype vocabulary
KV_DTYPES = {"sglang": {"fp8": "fp8_e4m3", "bf16": "bfloat16"}, "vllm": {"fp8": "fp8", "bf16": "bfloat16"}}


def dtype_args(layout: Layout, engine: str) -> list[str]:
    """The plan's dtypes as flags: fp8 weights of a bf16 checkpoint → online ``--quantization fp8``;
    bf16 → ``--dtype bfloat16``; a native fp8 checkpoint keeps its own quantization; the KV dtype
    → ``--kv-cache-dtype`` (absent: the engine's auto)."""
    s = layout.settings
    out = []
    if s.weight_dtype == "fp8" and s.native_weight_dtype != "fp8":
        out += ["--quantization", "fp8"]
    elif s.weight_dtype == "bf16" and s.native_weight_dtype != "fp8":
        out += ["--dtype", "bfloat16"]
    if s.kv_dtype:
        out += ["--kv-cache-dtype", KV_DTYPES[engine][s.kv_dtype]]
    return out


def parallel_args(pool: Pool, engine: str) -> list[str]:
    """How an instance's chips split the model, in the engine's flags (SGLang 0.5.23, vLLM 0.33):

    * ``tp`` (and a plan row without ``shape``): one tensor-parallel group of all the chips —
      SGLang ``--tp-size N``, vLLM ``--tensor-parallel-size N``.
    * ``pp``: tp 8 inside each scale-up domain × N/8 pipeline stages — SGLang ``--tp-size 8
      --pp-size N/8``, vLLM ``--tensor-parallel-size 8 --pipeline-parallel-size N/8``.
    * ``dep``: attention data parallel on every chip, experts expert-parallel over all N chips —
      SGLang ``--tp-size N --attn-dp-size N --ep-size N`` (0.5.23 deprecates ``--enable-dp-attention
      --dp-size N`` for ``--attn-dp-size N``); vLLM ``--data-parallel-size N --enable-expert-parallel``
      with tensor parallel 1 per rank (over several nodes vLLM derives each node's ranks from
      ``--nnodes/--node-rank``)."""
    chips, kind = int(pool.tp), pool.kind
    if engine == "sglang":
        if kind == PP:
            return ["--tp-size", str(SCALEUP_DOMAIN_CHIPS), "--pp-size", str(chips // SCALEUP_DOMAIN_CHIPS)]
        if kind == DEP:
            return ["--tp-size", str(chips), "--attn-dp-size", str(chips), "--ep-size", str(chips)]
        return ["--tp-size", str(chips)]
    if kind == PP:
        return ["--tensor-parallel-size", str(SCALEUP_DOMAIN_CHIPS),
                "--pipeline-parallel-size", str(chips // SCALEUP_DOMAIN_CHIPS)]
    if kind == DEP:
        return ["--tensor-parallel-size", "1", "--data-parallel-size", str(chips), "--enable-expert-parallel"]
    return ["--tensor-parallel-size", str(chips)]


def sglang_server_args(layout: Layout, pool: Pool, node: str | int = 0, leader: str | None = None) -> list[str]:
    """SGLang's arguments for one node of one instance of ``pool`` (``node``/``leader`` may be
    placeholders such as ``$(LWS_WORKER_INDEX)`` that the orchestrator fills in; ``leader=None``
    leaves the multi-node flags to an orchestrator that adds them itself, as Dynamo's does)."""
    s = layout.settings
    args = ["--model-path", s.model, "--served-model-name", s.served_model_name, *parallel_args(pool, "sglang"),
            "--host", "0.0.0.0", "--port", str(SERVER_PORT), "--trust-remote-code",
            "--disaggregation-mode", pool.engine_role,
            "--disaggregation-transfer-backend", pool.vendor.sglang_transfer_backend]
    if pool.vendor.sglang_device:
        args += ["--device", pool.vendor.sglang_device]
    if pool.engine_role == PREFILL:
        args += ["--disaggregation-bootstrap-port", str(BOOTSTRAP_PORT)]
    elif s.drc:
        args += ["--disaggregation-decode-enable-radix-cache"]
    args += dtype_args(layout, "sglang")
    if pool.nodes > 1 and leader is not None:
        args += ["--nnodes", str(pool.nodes), "--node-rank", str(node), "--dist-init-addr", f"{leader}:{DIST_PORT}"]
    return args


def vllm_server_args(layout: Layout, pool: Pool, node: str | int = 0, leader: str | None = None) -> list[str]:
    """``vllm serve`` arguments (the model first) for one node of one instance of ``pool``."""
    s = layout.settings
    role = "kv_producer" if pool.engine_role == PREFILL else "kv_consumer"
    kv = json.dumps({"kv_connector": pool.vendor.vllm_connector, "kv_role": role}, separators=(",", ":"))
    args = [s.model, "--served-model-name", s.served_model_name, *parallel_args(pool, "vllm"),
            "--host", "0.0.0.0", "--port", str(VLLM_PORT), "--trust-remote-code", "--kv-transfer-config", kv]
    if pool.engine_role == DECODE:
        args += ["--enable-prefix-caching" if s.drc else "--no-enable-prefix-caching"]
    args += dtype_args(layout, "vllm")
    if pool.nodes > 1:
        args += ["--nnodes", str(pool.nodes), "--node-rank", str(node), "--master-addr", str(leader)]
        if node != 0:
            args += ["--headless"]
    return args


def server_commands(layout: Layout, engine: str) -> list[Command]:
    """Every node of every instance of every pool, with concrete host names."""
    build, program, parser = ((sglang_server_args, SGLANG_SERVER, "sglang") if engine == "sglang"
                              else (vllm_server_args, VLLM_SERVE, "vllm"))
    out = []
    for pool in layout.pools:
        for i in range(pool.count):
            for node in range(pool.nodes):
                args = build(layout, pool, node, pool.host(i))
                out.append(Command(pool.datacenter, pool.name, i, node, pool.host(i, node), program, tuple(args),
                                   parser))
    return out


def sglang_router_args(router: Router) -> list[str]:
    args = ["--pd-disaggregation", "--host", "0.0.0.0", "--port", str(ROUTER_PORT), "--policy", "cache_aware"]
    for pool in router.prefill:
        for i in range(pool.count):
            args += ["--prefill", f"http://{pool.host(i)}:{SERVER_PORT}", str(BOOTSTRAP_PORT)]
    for pool in router.decode:
        for i in range(pool.count):
            args += ["--decode", f"http://{pool.host(i)}:{SERVER_PORT}"]
    return args


def vllm_proxy_args(router: Router) -> list[str]:
    def hosts(pools: tuple[Pool, ...]) -> list[str]:
        return [pool.host(i) for pool in pools for i in range(pool.count)]

    prefill, decode = hosts(router.prefill), hosts(router.decode)
    return ["--host", "0.0.0.0", "--port", str(ROUTER_PORT),
            "--prefiller-hosts", *prefill, "--prefiller-ports", *[str(VLLM_PORT)] * len(prefill),
            "--decoder-hosts", *decode, "--decoder-ports", *[str(VLLM_PORT)] * len(decode)]


def router_commands(layout: Layout, engine: str) -> list[Command]:
    out = []
    for r in layout.routers:
        if engine == "sglang":
            out.append(Command(r.src, r.name, None, None, r.host, SGLANG_ROUTER, tuple(sglang_router_args(r)),
                               "sglang-router"))
        else:
            out.append(Command(r.src, r.name, None, None, r.host, VLLM_PROXY, tuple(vllm_proxy_args(r)), None))
    return out
