"""The executor's instance start-up and drain on this machine, measured and predicted (issue 46, part 5).

    python bench/bench_startup.py [--reps 3] [--inflight 4] [--tokens 192] [--write bench/data/startup_cpu.json]

What runs: a local Ray (one node carrying one datacenter's chips) and the executor's `RayDeployment`
of one aggregated (A) instance of a tiny seeded Llama saved as a checkpoint file (`Engine.save`), on CPU.

Start-up, per repetition and checkpoint (the two sizes interleaved): the running instance stops, a new one starts (`RayDeployment.start_instance`:
actor placed → checkpoint loaded → endpoint up → directory told → registered as joining), the router
pings it until it answered a heartbeat (joined), then two requests: the first's TTFT over the second's
is the warm-up forward (first-use costs). Start-up = start call → joined + warm-up forward.
Phases on their own: an empty actor placed and answering (spawn), the engine's imports in a fresh
worker (torch, executor.cluster), and the checkpoint load in this process at two sizes (the tiny
model and a ~125 MB one): load rate = Δbytes / Δseconds, the rest a fixed cost.

The simulator's start-up model (`placer.replan.fleets.Startup`) is ``weights / (chips × load rate)
+ warm-up``. Its terms from these measurements: the load rate above, and warm-up = the tiny
instance's measured start-up less its bytes / rate (everything that does not scale with the bytes).
**The exam**: the same formula predicts the start-up of an instance of the ~125 MB checkpoint, which
is then measured on Ray the same way; printed with the error.

Drain: ``--inflight`` requests of ``--tokens`` output tokens run on an instance; once each has made
8 tokens the router drains it (no new requests, `Router.drain`) and the time until it holds nothing
is measured. Predicted: the most output tokens any of them has left × the pace they decoded at just
before the drain (seconds per token over the streams, as the simulator's drain is output tokens ×
TPOT). Where the time went: the streams' last tokens (they end within a few ms of each other: the batch
holds all of them to the end — no request decodes alone, so the step stays the measured one) and the
stalls, gaps between tokens after the drain of over ``STALL_PACES`` paces (a shared host's busy spells),
printed with the prediction plus them. `--write` stores the simulator's figures with their provenance (`placer simulate
--replan-every ... --startup-measured FILE`). The machine may be shared: medians over `--reps`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams  # noqa: E402
from placer.plan import Plan  # noqa: E402

TINY = ModelConfig()
BIG = ModelConfig(num_layers=8, hidden_size=512, num_q_heads=8, num_kv_heads=4, head_dim=64, intermediate_size=2048)
EC = EngineConfig(backend="torch", block_size=4, num_blocks=1024)
PLAN = Plan.model_validate({
    "scenario": "startup-bench",
    "pools": [{"role": "A", "datacenter": "dc-a", "chip": "cpu", "tp": 1, "count": 1}],
    "routes": [{"request_class": "c", "pipeline": "A", "src": "dc-a", "dst": "dc-a", "rps": 1.0}]})
PROMPT = [256, *b"the quick brown fox jumps over the lazy dog"]
POLL_S = 0.005
STALL_PACES = 3.0  # a gap between two tokens of a stream over this many paces is a stall (not decoding)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def checkpoint(config: ModelConfig, path: Path) -> int:
    Engine.from_seed(config, EC, seed=0, device="cpu").save(path)
    return path.stat().st_size


def load_seconds(path: Path, reps: int) -> float:
    """Median seconds to load the checkpoint into an engine, in this process (page cache warm)."""
    Engine.from_file(path, EC, device="cpu")  # first read: into the page cache, as a node's local disk
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        Engine.from_file(path, EC, device="cpu")
        times.append(time.perf_counter() - t)
    return _median(times)


def spawn_and_import(reps: int) -> tuple[float, float]:
    """Median seconds for an empty actor to be placed and answer, and for the engine's imports in it."""
    import ray

    @ray.remote(num_cpus=0, resources={"dc:dc-a": 1, "chip:cpu": 1})
    class Probe:
        def imports(self) -> float:
            t = time.perf_counter()
            import torch  # noqa: F401

            import executor.cluster  # noqa: F401
            return time.perf_counter() - t

    spawn, imports = [], []
    for _ in range(reps):
        t = time.perf_counter()
        probe = Probe.remote()
        imports.append(ray.get(probe.imports.remote()))
        spawn.append(time.perf_counter() - t - imports[-1])
        ray.kill(probe)
        time.sleep(0.5)  # its resources back before the next
    return _median(spawn), _median(imports)


def _sampling(n: int) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, stop_at_eos=False)


def _ttft(router, n: int = 4) -> float:
    stream = router.submit(PROMPT, _sampling(n))
    stream.result(120)
    return stream.token_times[0] - stream.created_at


def start_once(dep, spec) -> dict[str, float]:
    """Stop what runs, start ``spec``; seconds to joined and the warm-up forward."""
    for name in list(dep.router.instances):
        dep.stop_instance(name)
    t0 = time.perf_counter()
    dep.start_instance(spec, joining=True)
    started = time.perf_counter() - t0
    while spec.name in dep.router.joining and time.perf_counter() - t0 < 120:
        dep.router.ping([spec.name])
        time.sleep(POLL_S)
    joined = time.perf_counter() - t0
    first = _ttft(dep.router)
    steady = _median([_ttft(dep.router) for _ in range(3)])
    warm = max(0.0, first - steady)
    return {"started_s": started, "joined_s": joined, "warmup_forward_s": warm, "startup_s": joined + warm}


def drain_once(router, name: str, inflight: int, tokens: int) -> dict[str, float]:
    streams = [router.submit([*PROMPT, k], _sampling(tokens)) for k in range(inflight)]
    t0 = time.perf_counter()
    while min(len(s.token_times) for s in streams) < 8 and time.perf_counter() - t0 < 120:
        time.sleep(POLL_S)
    now = time.monotonic()
    left = max(tokens - len(s.token_times) for s in streams)
    paces = [(s.token_times[-1] - s.token_times[1]) / (len(s.token_times) - 2) for s in streams]
    predicted = left * _median(paces)
    router.drain(name)
    while router.holding(name) and time.monotonic() - now < 300:
        time.sleep(POLL_S)
    measured = time.monotonic() - now
    for s in streams:
        s.result(60)
    pace = _median(paces)
    # what the drain's time went to: the streams' last tokens (within a few ms: the batch holds all of them to
    # the end, nothing decodes alone) and stalls — gaps between a stream's tokens after the drain call of over
    # STALL_PACES × the pace (a shared host's busy spells), the time beyond the pace they add
    lasts = [s.token_times[-1] for s in streams]
    slowest = max(streams, key=lambda s: s.token_times[-1]).token_times
    gaps = [b - a for a, b in zip(slowest, slowest[1:]) if a >= now]
    stalls = sum(g - pace for g in gaps if g > STALL_PACES * pace)
    return {"tokens_left": left, "pace_s_per_token": pace, "predicted_s": predicted, "measured_s": measured,
            "finish_spread_s": max(lasts) - min(lasts), "stall_s": stalls, "predicted_plus_stalls_s": predicted + stalls}


def deployment(model_file: Path):
    from executor.config import ServingConfig
    from executor.deploy import RayDeployment

    return RayDeployment(PLAN, TINY, EC, ServingConfig.from_plan(PLAN), model_file=str(model_file),
                         start_timeout_s=120)


def measure_instances(dep, reps: int, files: dict[str, Path]) -> dict[str, list[dict[str, float]]]:
    """Start-ups of each checkpoint, interleaved (a busy spell of a shared host falls on both alike).
    The deployment's actors take their checkpoint from its actor arguments: swapped per start."""
    base, args = dep.specs[0], dep._actor_args  # (model config, engine config, seed, model_file, ...)
    out: dict[str, list[dict[str, float]]] = {tag: [] for tag in files}
    for k in range(reps):
        for tag, path in files.items():
            dep._actor_args = (*args[:3], str(path), *args[4:])
            out[tag].append(start_once(dep, dataclasses.replace(base, name=f"{tag}-{k}")))
    dep._actor_args = args
    return out


def _err(pred: float, meas: float) -> str:
    return f"{100 * (pred - meas) / meas:+.0f} %" if meas > 0 else "—"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=192)
    ap.add_argument("--write", type=Path, default=None, help="store the simulator's figures here (JSON)")
    args = ap.parse_args(argv)
    import ray

    from executor.deploy import start_local_ray
    from executor.placement import placement

    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tiny_path, big_path = Path(tmp) / "tiny.safetensors", Path(tmp) / "big.safetensors"
        tiny_b, big_b = checkpoint(TINY, tiny_path), checkpoint(BIG, big_path)
        tiny_load, big_load = load_seconds(tiny_path, args.reps), load_seconds(big_path, args.reps)
        rate = (big_b - tiny_b) / max(big_load - tiny_load, 1e-9)  # bytes per second
        start_local_ray(placement(PLAN.model_copy(update={"pools": [PLAN.pools[0].model_copy(update={"count": 2})]})),
                        num_cpus=2, object_store_bytes=100 * 1024 * 1024)
        try:
            spawn, imports = spawn_and_import(args.reps)
            dep = deployment(tiny_path)
            try:
                runs = measure_instances(dep, args.reps, {"tiny": tiny_path, "big": big_path})
                tiny, big = runs["tiny"], runs["big"]
                drains = []
                for k in range(args.reps):  # a fresh instance per drain: a drained one takes no requests
                    start_once(dep, dataclasses.replace(dep.specs[0], name=f"drain-{k}"))
                    drains.append(drain_once(dep.router, f"drain-{k}", args.inflight, args.tokens))
            finally:
                dep.close()
        finally:
            ray.shutdown()
    med = {k: _median([r[k] for r in tiny]) for k in tiny[0]}
    med_big = {k: _median([r[k] for r in big]) for k in big[0]}
    warmup = med["startup_s"] - tiny_b / rate
    predicted_big = big_b / rate + warmup
    drain = {k: _median([d[k] for d in drains]) for k in drains[0]}
    print(f"host: {platform.node()} ({os.cpu_count()} cores), {args.reps} repetitions, medians; "
          f"{time.perf_counter() - wall:.0f} s in all")
    print(f"checkpoint load in-process: tiny {tiny_b / 1e6:.2f} MB {tiny_load * 1e3:.1f} ms, big {big_b / 1e6:.1f} MB "
          f"{big_load * 1e3:.1f} ms → load rate {rate / 1e9:.2f} GB/s (page cache warm)")
    print(f"phases: actor placed and answering {spawn:.2f} s, engine imports in a fresh worker {imports:.2f} s")
    print(f"tiny instance on Ray: started {med['started_s']:.2f} s, joined (first heartbeat) {med['joined_s']:.2f} s, "
          f"warm-up forward {med['warmup_forward_s'] * 1e3:.0f} ms → start-up {med['startup_s']:.2f} s")
    print(f"simulator's terms: load {rate / 1e9:.2f} GB/s per chip, warm-up {warmup:.2f} s "
          "(the tiny start-up less its bytes / rate)")
    print(f"exam, the {big_b / 1e6:.0f} MB checkpoint: start-up predicted {predicted_big:.2f} s, measured "
          f"{med_big['startup_s']:.2f} s (joined {med_big['joined_s']:.2f} s, warm-up forward "
          f"{med_big['warmup_forward_s'] * 1e3:.0f} ms), error {_err(predicted_big, med_big['startup_s'])}")
    print(f"drain with {args.inflight} in flight, {drain['tokens_left']:.0f} tokens left at "
          f"{drain['pace_s_per_token'] * 1e3:.1f} ms/token: predicted {drain['predicted_s']:.2f} s, measured "
          f"{drain['measured_s']:.2f} s, error {_err(drain['predicted_s'], drain['measured_s'])}; the streams "
          f"finished within {drain['finish_spread_s'] * 1e3:.0f} ms of each other (the batch held {args.inflight} to "
          f"the end), stalls (gaps over {STALL_PACES:g} paces) {drain['stall_s'] * 1e3:.0f} ms; predicted + stalls "
          f"{drain['predicted_plus_stalls_s']:.2f} s, error {_err(drain['predicted_plus_stalls_s'], drain['measured_s'])}")
    out = {
        "source": "bench/bench_startup.py", "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(), "cpus": os.cpu_count(), "reps": args.reps,
        "model": "the executor's tiny seeded Llama (CPU, float32), an Engine.save checkpoint",
        "load_gbyte_per_s_per_chip": round(rate / 1e9, 4), "warmup_s": round(warmup, 3),
        "drain_s": round(drain["measured_s"], 3),
        "drain_inflight": args.inflight, "drain_tokens": args.tokens,
        "phases_s": {"spawn": round(spawn, 3), "imports": round(imports, 3), "tiny_load": round(tiny_load, 4),
                     "big_load": round(big_load, 4)},
        "tiny": {"bytes": tiny_b, **{k: round(v, 4) for k, v in med.items()}},
        "exam": {"bytes": big_b, "predicted_startup_s": round(predicted_big, 3),
                 **{k: round(v, 4) for k, v in med_big.items()}},
        "drain": {k: round(v, 4) for k, v in drain.items()},
    }
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
