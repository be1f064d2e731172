"""A deployment as text, for `placer deploy --dry-run` (and what `placer deploy` prints first).

In: a plan, its placed `InstanceSpec`s, its `ServingConfig` (and the `Runtime`). Out: `describe`
— engines, one line per instance (role, datacenter, chip, tp, device, GPUs claimed and pinned,
Ray resources), each datacenter's emulated node resources, the WAN lines, where the router sits
with its pipelines and the rules they use (P-MD threshold, filter, A's share and chunk, handoff); and the pieces a fleet's
description reuses per model (`executor.fleet_deploy.describe_fleet`). Pure text, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from executor.config import ServingConfig
from executor.devices import Runtime
from executor.placement import DEFAULT_AGG_CHUNK_TOKENS, InstanceSpec, front_datacenter, node_resources
from executor.routing import Pipeline


def describe(plan: Any, specs: list[InstanceSpec], config: ServingConfig, runtime: Runtime | None = None) -> str:
    """The placement as text: engines, instances (device, GPUs claimed), per-datacenter resources, lines, routing."""
    lines = [f"plan {plan.scenario!r}: {len(specs)} instances" + capped_note(plan, specs)]
    if runtime is not None:
        lines.append(f"engines: {runtime.describe()}")
    lines += instance_table(specs)
    lines += shared_lines(specs, config)
    lines += routing_lines(plan, config, specs=specs)
    return "\n".join(lines)


def capped_note(plan: Any, specs: list[InstanceSpec]) -> str:
    planned = sum(p.count for p in plan.pools)
    return f" (of {planned} planned; --max-per-pool caps each pool)" if planned != len(specs) else ""


def instance_table(specs: list[InstanceSpec], indent: str = "") -> list[str]:
    """One line per instance: role, datacenter, chip, tp, device, GPUs claimed (and pinned), resources."""
    lines = [f"{indent}{'instance':<40} {'role':<4} {'datacenter':<12} {'chip':<14} {'tp':>3} {'device':<6} "
             f"{'gpus':>6}  resources"]
    for s in specs:
        res = ", ".join(f"{k}={v:g}" for k, v in s.resources.items())
        pinned = f" (GPU {','.join(map(str, s.gpu_ids))})" if s.gpu_ids else ""
        lines.append(f"{indent}{s.name:<40} {s.role:<4} {s.datacenter:<12} {s.chip:<14} {s.tp:>3} {s.device:<6} "
                     f"{s.num_gpus:>6g}  {res}{pinned}")
    return lines


def shared_lines(specs: list[InstanceSpec], config: ServingConfig) -> list[str]:
    """Each datacenter's emulated node resources and the WAN lines."""
    lines = ["node resources (local emulation: one node holds them all):"]
    for dc, res in node_resources(specs).items():
        lines.append(f"  {dc}: " + ", ".join(f"{k}={v:g}" for k, v in res.items()))
    for pair, shape in config.links.items():
        a, b = sorted(pair)
        lines.append(f"link {a}<->{b}: {shape.gbit_per_s:g} Gbit/s, RTT {shape.rtt_ms:g} ms, "
                     f"jitter {shape.jitter_ms:g} ms, loss {shape.loss:g}")
    return lines


def routing_lines(plan: Any, config: ServingConfig, indent: str = "",
                  specs: Sequence[InstanceSpec] = ()) -> list[str]:
    """Where the router sits, its pipelines, and only the rules those pipelines use: the P-MD
    threshold where P-MD and P-RLD-MD both serve, the filter where P-RLD does, A's share and
    prefill chunk where A does, the P instances of each set queue where the plan has them, the handoff
    where a pipeline relays."""
    policy, handoff = config.routing, config.handoff
    allowed = policy.allowed
    parts = [f"router in {config.router_datacenter or front_datacenter(plan)}",
             f"pipelines {sorted(p.value for p in allowed)}"]
    if Pipeline.P_MD in allowed and Pipeline.P_RLD_MD in allowed:
        parts.append(f"P-MD at hit >= {policy.direct_min_hit_rate:.3f}")
    if Pipeline.P_RLD in allowed:
        rule = policy.filter_rule
        parts.append(f"filter: input >= {rule.min_input_tokens}, hit < {rule.max_hit_rate:.2f}, "
                     f"output < {rule.max_output_tokens}")
    if Pipeline.P_A in allowed:
        share = "per class" if policy.agg_classes else f"{policy.agg_share:.0%} of requests"
        chunks = sorted({s.chunked_prefill_tokens or DEFAULT_AGG_CHUNK_TOKENS for s in specs if s.role == "A"})
        chunk = f", prefill chunk {'/'.join(map(str, chunks))} tokens" if chunks else ""
        parts.append(f"A: {share}{chunk}")
    lines = [indent + "; ".join(parts)]
    if policy.set_queues is not None:  # which P instances serve which set queue (executor.set_queues)
        sets: dict[frozenset[str], list[str]] = {}
        for name, classes in policy.set_queues.admits:
            sets.setdefault(classes, []).append(name)
        lines.append(indent + "P set queues: " + "; ".join(f"{'+'.join(sorted(c))} on {', '.join(names)}"
                                                           for c, names in sets.items()))
    if any(p.uses_relay for p in allowed):
        lines.append(f"{indent}handoff {handoff.mode}, catch-up above {handoff.catch_up_threshold_tokens} pending tokens")
    return lines
