"""``--format k8s``: Kubernetes manifests per datacenter (SGLang servers, SGLang routers).

in:  a Layout and a namespace; out: ``{<dc>/<unit>.yaml: text}``.

* A one-node pool is a ``Deployment`` (replicas = the plan's count); a pool whose instances
  span nodes is a ``LeaderWorkerSet`` (leaderworkerset.x-k8s.io/v1: replicas = count, size =
  nodes per instance; the leader runs node rank 0 and rendezvous at ``$(LWS_LEADER_ADDRESS)``,
  the workers take their rank from ``$(LWS_WORKER_INDEX)``).
* Every pod asks for its chips through the vendor's device-plugin resource
  (``nvidia.com/gpu``, ``amd.com/gpu``, ``huawei.com/Ascend910``, ``habana.ai/gaudi``) and is
  pinned by ``nodeSelector`` to the labels operators put on their nodes:
  ``placer.io/datacenter=<datacenter>`` and ``placer.io/chip=<chip>`` (LABELS; values are the
  names in DNS-label form: lower case, e.g. ``ascend-910b``).
* A router is a ``Deployment`` of ``sglang_router.launch_router`` in Kubernetes service
  discovery mode (it watches the pods whose labels match its prefill/decode selectors; the
  prefill pods carry the ``sglang.ai/bootstrap-port`` annotation it reads), a ``Service`` in
  front of it, and the ``ServiceAccount``/``Role``/``RoleBinding`` that let it list pods.
"""

from __future__ import annotations

import yaml

from placer.export.commands import SGLANG_ROUTER, SGLANG_SERVER, sglang_server_args
from placer.errors import InputError
from placer.export.layout import BOOTSTRAP_PORT, PREFILL, ROUTER_PORT, SERVER_PORT, Layout, Pool, Router
from placer.export.names import add_file, slug

LABEL_DC = "placer.io/datacenter"
LABEL_CHIP = "placer.io/chip"
LABEL_POOL = "placer.io/pool"
LABEL_ROLE = "placer.io/engine-role"
LABEL_SERVES = "placer.io/serves"  # only on the pod that answers HTTP (the leader of a multi-node instance)
LABELS = (LABEL_DC, LABEL_CHIP)  # the node labels operators set
DEFAULT_IMAGE = "lmsysorg/sglang:v0.5.23"  # servers and routers: SGLang's image carries sglang_router


def _pod_labels(pool: Pool, serves: bool) -> dict[str, str]:
    labels = {LABEL_DC: pool.dc_label, LABEL_POOL: pool.name, LABEL_ROLE: pool.engine_role,
              "placer.io/plan-role": pool.plan_role}
    if serves:
        labels[LABEL_SERVES] = "true"
    return labels


def _container(layout: Layout, pool: Pool, args: list[str], image: str) -> dict:
    gpus = str(pool.chips_per_node)
    return {
        "name": "sglang",
        "image": image,
        "command": list(SGLANG_SERVER),
        "args": args,
        "ports": [{"containerPort": SERVER_PORT, "name": "http"}]
        + ([{"containerPort": BOOTSTRAP_PORT, "name": "bootstrap"}] if pool.engine_role == PREFILL else []),
        "resources": {"limits": {pool.vendor.k8s_resource: gpus}, "requests": {pool.vendor.k8s_resource: gpus}},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }


def _pod_template(layout: Layout, pool: Pool, args: list[str], image: str, serves: bool) -> dict:
    annotations = {"sglang.ai/bootstrap-port": str(BOOTSTRAP_PORT)} if pool.engine_role == PREFILL and serves else {}
    meta: dict = {"labels": _pod_labels(pool, serves)}
    if annotations:
        meta["annotations"] = annotations
    return {
        "metadata": meta,
        "spec": {
            "nodeSelector": {LABEL_DC: pool.dc_label, LABEL_CHIP: pool.chip_label},
            "containers": [_container(layout, pool, args, image)],
            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}],
        },
    }


def pool_manifests(layout: Layout, pool: Pool, namespace: str, image: str) -> list[dict]:
    name = slug(f"{pool.dc_label}-{pool.name}")
    meta = {"name": name, "namespace": namespace, "labels": {LABEL_DC: pool.dc_label, LABEL_POOL: pool.name}}
    if pool.nodes == 1:
        return [{
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": pool.count, "selector": {"matchLabels": {LABEL_DC: pool.dc_label,
                                                                          LABEL_POOL: pool.name}},
                     "template": _pod_template(layout, pool, sglang_server_args(layout, pool), image, True)},
        }]
    leader = sglang_server_args(layout, pool, 0, "$(LWS_LEADER_ADDRESS)")
    worker = sglang_server_args(layout, pool, "$(LWS_WORKER_INDEX)", "$(LWS_LEADER_ADDRESS)")
    return [{
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta,
        "spec": {"replicas": pool.count, "leaderWorkerTemplate": {
            "size": pool.nodes,
            "leaderTemplate": _pod_template(layout, pool, leader, image, True),
            "workerTemplate": _pod_template(layout, pool, worker, image, False),
        }},
    }]


def _selector(labels: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in labels.items()]


def router_args(router: Router, namespace: str) -> list[str]:
    prefill = {LABEL_DC: router.src_label, LABEL_ROLE: PREFILL, LABEL_SERVES: "true"}
    decode = {LABEL_DC: router.dst_label, "placer.io/plan-role": router.decode_role, LABEL_SERVES: "true"}
    return ["--pd-disaggregation", "--host", "0.0.0.0", "--port", str(ROUTER_PORT), "--policy", "cache_aware",
            "--service-discovery", "--service-discovery-namespace", namespace,
            "--service-discovery-port", str(SERVER_PORT),
            "--prefill-selector", *_selector(prefill), "--decode-selector", *_selector(decode)]


def router_manifests(router: Router, namespace: str, image: str) -> list[dict]:
    name = router.name
    labels = {"app.kubernetes.io/name": name, LABEL_DC: router.src_label}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {"serviceAccountName": name,
                      "nodeSelector": {LABEL_DC: router.src_label},
                      "containers": [{"name": "router", "image": image, "command": list(SGLANG_ROUTER),
                                      "args": router_args(router, namespace),
                                      "ports": [{"containerPort": ROUTER_PORT, "name": "http"}]}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": labels, "ports": [{"name": "http", "port": ROUTER_PORT, "targetPort": ROUTER_PORT}]}},
    ]


def dump(documents: list[dict], header: str) -> str:
    return header + "".join("---\n" + yaml.safe_dump(d, sort_keys=False, width=120) for d in documents)


def render_k8s(layout: Layout, namespace: str, image: str | None) -> dict[str, str]:
    header = f"# Generated by `placer export --format k8s` from plan {layout.plan.scenario!r}.\n"
    files: dict[str, str] = {}
    names: dict[str, str] = {}  # object name → the unit that has it: one namespace holds them all
    for pool in layout.pools:
        docs = pool_manifests(layout, pool, namespace, image or DEFAULT_IMAGE)
        _claim(names, docs[0]["metadata"]["name"], f"pool {pool.name} in {pool.datacenter}")
        add_file(files, f"{pool.dc_label}/{pool.name}.yaml", dump(docs, header))
    for router in layout.routers:
        _claim(names, router.name, f"router {router.src}->{router.dst}")
        add_file(files, f"{router.src_label}/{router.name}.yaml",
                 dump(router_manifests(router, namespace, image or DEFAULT_IMAGE), header))
    return files


def _claim(names: dict[str, str], name: str, unit: str) -> None:
    """Record that ``unit`` has the Kubernetes name ``name``; InputError if another unit has it."""
    if name in names:
        raise InputError(f"k8s: {unit} and {names[name]} would both be named {name!r}; rename a datacenter or chip")
    names[name] = unit
