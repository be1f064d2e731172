"""``placer profile model``: measure a model's prefill and decode grids with the executor's engine.

in:  a catalog model (or an explicit shape), a device (cpu or cuda), a grid (quick or full)
out: a chip profile (schema 2) whose ``tables`` hold one measured table: the seconds of
     ONE prefill forward by (new tokens, cached context) and of one decode step by
     (batch, context tokens), each the median of ``reps`` timed runs after a warm-up (in each of
     ``rounds`` passes over the grid),
     with the exact shape and provenance (:class:`placer.profiles.table_io.TableRecord`).

What runs: :class:`executor.engine.Engine` with random weights (``Engine.from_seed``; no
download) of a Llama-architecture model — the ``triton`` ops backend on CUDA, ``torch`` on
the CPU — in bfloat16 on CUDA and, by default, float32 on the CPU (the executor's own
default there, and what ``bench/bench_serve.py`` serves; a CPU without native bf16
matrix units runs bfloat16 GEMMs many times slower). The planner knows the dtypes bf16
and fp8 only, so a float32 run is keyed ``bf16`` / ``bf16`` (the name a scenario gives its
stand-in model, as bench_serve's does); ``engine`` and ``model_shape.dtype`` say float32. A prefill point (T, C) first caches a C-token prefix, then times
``Engine.prefill`` of that prefix + T fresh tokens (only the T new tokens are forwarded; a
fresh suffix each run, so nothing of the timed part is cached). A decode point (B, L)
prefills B distinct L-token prompts, then times ``Engine.decode_step`` over all B. The
times are the engine's whole call (scheduling, KV bookkeeping, sampling included), as a
serving engine pays them. On the CPU they are, by default, the timing thread's CPU time
with torch on one thread (``clock="thread"``): the seconds of one core, which other work
on a shared machine does not inflate as it does wall time (memory-bandwidth contention
still shows); ``placer.sim.runtime.Host`` turns them back into wall seconds for the cores
a deployment shares. The ``serve`` grid covers ``bench/bench_serve.py``'s trace.

The shape: a catalog model gives layers, hidden, heads and head dim; the catalog has no
FFN width or vocabulary, so ``intermediate`` defaults to 3.5 × hidden (Llama-3's ratio,
14336 / 4096) and ``vocab`` to 128256 (Llama-3's tokenizer). Any override (a smaller
model for the CPU, say) changes the table's model name to ``llama-tiny-<hash of the
shape>``; the profile's ``model_shape.scenario_model`` is the inline model a scenario
names to use it (docs/profiles.md).
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import time
from dataclasses import asdict, dataclass

from placer.catalog import get_model
from placer.errors import InputError

LLAMA3_FFN_RATIO = 3.5  # intermediate / hidden of Llama-3 (14336 / 4096)
LLAMA3_VOCAB = 128256
GRIDS = {
    "tiny": ((8, 32), (0, 32), (1, 2), (16, 64)),  # a smoke check (tests): seconds on a tiny shape
    # (prefill new tokens, prefill cached context), (decode batch, decode context)
    "quick": ((16, 64, 256), (0, 256), (1, 4, 16), (64, 512)),
    "full": ((128, 512, 2048, 8192), (0, 2048, 8192), (1, 8, 32, 128), (512, 2048, 8192)),
    # bench/bench_serve.py's trace on the CPU: prompts up to ~1.6K tokens (cold, or a few dozen new
    # over a cached context), decode batches up to ~10 at contexts up to ~1.9K
    "serve": ((16, 64, 256, 1024, 2048), (0, 512, 2048), (1, 2, 4, 8, 16), (256, 1024, 2048)),
}
BLOCK = 16


@dataclass(frozen=True)
class Shape:
    """The exact architecture measured (the executor's ModelConfig fields that matter)."""

    num_layers: int
    hidden_size: int
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int

    def params(self) -> int:
        attn = self.hidden_size * self.head_dim * (2 * self.num_q_heads + 2 * self.num_kv_heads)
        mlp = 3 * self.hidden_size * self.intermediate_size
        return self.num_layers * (attn + mlp) + 2 * self.vocab_size * self.hidden_size

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:8]


ENGINE_DTYPES = ("bfloat16", "float32")


def shape_for(model: str, overrides: dict) -> tuple[str, Shape]:
    """(table model name, shape) for a catalog model with optional overrides (None = keep)."""
    try:
        m = get_model(model)
    except (KeyError, ValueError) as e:
        raise InputError(f"--model: {e}") from None
    if m.attn != "gqa":
        raise InputError(f"--model {model!r}: only Llama-architecture (gqa) models run on the executor's engine")
    base = Shape(m.layers, m.hidden, m.q_heads, m.kv_heads, m.head_dim,
                 round(LLAMA3_FFN_RATIO * m.hidden / 256) * 256, LLAMA3_VOCAB)
    given = {k: v for k, v in overrides.items() if v is not None}
    for key, value in given.items():
        if value <= 0:
            raise InputError(f"--{key.replace('_', '-')}: must be > 0, got {value}")
    shape = Shape(**{**asdict(base), **given})
    if shape.num_q_heads % shape.num_kv_heads:
        raise InputError(f"--heads {shape.num_q_heads} must be a multiple of --kv-heads {shape.num_kv_heads}")
    name = model if shape == base else f"llama-tiny-{shape.digest()}"
    return name, shape


def scenario_model(name: str, shape: Shape, dtype: str = "bfloat16") -> dict:
    """The inline model of a scenario (placer.specs.ModelSpec) that this shape is.

    The planner's KV is bf16; a float32 engine's KV is twice as large per token, so its
    stand-in model has twice the head dimension (same KV bytes per token — what the
    transfers and memory rows use)."""
    billions = shape.params() / 1e9
    head_dim = shape.head_dim * (2 if dtype == "float32" else 1)
    return {"name": name, "attn": "gqa", "layers": shape.num_layers, "hidden": shape.hidden_size,
            "q_heads": shape.num_q_heads, "kv_heads": shape.num_kv_heads, "head_dim": head_dim,
            "params_total_b": billions, "params_active_b": billions}


CLOCKS = ("wall", "thread")


def _timed(torch, device, run, clock: str = "wall") -> float:
    """Seconds of ``run()``: wall-clock (CUDA synchronised), or this thread's CPU time
    (``clock="thread"``, CPU only: what the call costs one core, whatever else the machine runs)."""
    if clock == "thread":
        start = time.thread_time()
        run()
        return time.thread_time() - start
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def _engine(torch, device, shape: Shape, grid, dtype: str):
    from executor.engine import Engine, EngineConfig, ModelConfig

    tokens, contexts, batches, decode_contexts = grid
    most = max(max(tokens) + max(contexts), max(decode_contexts) + 8)
    blocks = (max(batches) + 2) * (most // BLOCK + 2) + 2 * (max(tokens) + max(contexts)) // BLOCK + 64
    config = EngineConfig(backend="triton" if device.type == "cuda" else "torch", block_size=BLOCK,
                          num_blocks=blocks, max_running_requests=max(batches) + 2,
                          max_prefill_tokens=max(tokens) + max(contexts) + BLOCK)
    model = ModelConfig(vocab_size=shape.vocab_size, num_layers=shape.num_layers, hidden_size=shape.hidden_size,
                        num_q_heads=shape.num_q_heads, num_kv_heads=shape.num_kv_heads, head_dim=shape.head_dim,
                        intermediate_size=shape.intermediate_size, dtype=dtype)
    return Engine.from_seed(model, config, seed=0, device=device), config


def prefill_point(torch, device, eng, rng, tokens: int, context: int, reps: int, clock: str,
                  samples: list[float] | None = None) -> float:
    """Seconds of one ``eng.prefill`` of ``tokens`` new tokens after ``context`` cached ones: the
    median of ``reps`` after a warm-up (one grid point of the table; bench/measure_runtime.py probes
    the same way). ``samples``: where the timed runs are also appended (rounds pool them)."""
    prefix = [rng.randrange(256) for _ in range(context)]
    if context:
        eng.finish(eng.prefill(prefix + [rng.randrange(256)]).request)  # cache the prefix
    times = []
    for i in range(reps + 1):  # the first run warms up
        prompt = prefix + [rng.randrange(256) for _ in range(tokens)]
        box = []
        seconds = _timed(torch, device, lambda: box.append(eng.prefill(prompt)), clock)
        eng.finish(box[0].request)
        if i:
            times.append(seconds)
    if samples is not None:
        samples.extend(times)
    return statistics.median(times)


def decode_point(torch, device, eng, rng, batch: int, context: int, reps: int, clock: str,
                 samples: list[float] | None = None) -> float:
    """Seconds of one ``eng.decode_step`` of ``batch`` sequences of ``context`` tokens: the median of
    ``reps`` after a warm-up step (``samples``: as :func:`prefill_point`)."""
    reqs = [eng.prefill([rng.randrange(256) for _ in range(context)]).request for _ in range(batch)]
    eng.decode_step(reqs)  # warm-up
    times = [_timed(torch, device, lambda: eng.decode_step(reqs), clock) for _ in range(reps)]
    for req in reqs:
        eng.finish(req)
    if samples is not None:
        samples.extend(times)
    return statistics.median(times)


def profile_model(device: str = "cpu", model: str = "llama-3.1-8b", tp: int = 1, grid: str = "quick",
                  chip: str | None = None, reps: int = 3, overrides: dict | None = None, on_point=None,
                  dtype: str | None = None, name: str | None = None, clock: str | None = None,
                  rounds: int = 1) -> dict:
    """Measure the grids; return the chip-profile dict (schema 2) with one table.

    ``rounds``: the whole grid is measured that many times over, each point ``reps`` times per
    round, and each point keeps the median of all its timed runs. On a shared machine a burst of
    other work lasts seconds — longer than one point's runs, so it can move a point whole (a
    (64, 2048) prefill read 72.8 ms in one profile and 51.5-52.8 ms in a dozen probes around it,
    2026-12-02) — while rounds are minutes apart, so the burst reaches one round of the point's.

    ``dtype``: the engine's dtype (default bfloat16 on CUDA, float32 on the CPU); ``name``:
    the table's model name (default: the catalog name, or ``llama-tiny-<hash>`` for an
    overridden shape); ``clock``: ``wall`` or ``thread`` (the timing thread's CPU time: the
    seconds of one uncontended core, robust on a shared machine; CPU only, and its default
    there, with torch on one thread as the executor serves)."""
    import torch

    from profiler.run import provenance, resolve_rooflines

    if tp != 1:
        raise InputError(f"--tp {tp}: the executor's engine runs one device; only --tp 1 is measured")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise InputError(f"--rounds must be a whole number >= 1, got {rounds!r}")
    if grid not in GRIDS:
        raise InputError(f"--grid must be one of {', '.join(GRIDS)}, got {grid!r}")
    default_name, shape = shape_for(model, overrides or {})
    name = name or default_name
    dev = torch.device(device)
    dtype = dtype or ("bfloat16" if dev.type == "cuda" else "float32")
    if dtype not in ENGINE_DTYPES:
        raise InputError(f"--dtype must be one of {', '.join(ENGINE_DTYPES)}, got {dtype!r}")
    clock = clock or ("wall" if dev.type == "cuda" else "thread")
    if clock not in CLOCKS:
        raise InputError(f"--clock must be one of {', '.join(CLOCKS)}, got {clock!r}")
    if clock == "thread" and dev.type != "cpu":
        raise InputError(f"--clock thread measures CPU time: only with --device cpu, got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"--device: {device!r} asked for, but torch sees no CUDA device")
    chip_name, roof, device_model = resolve_rooflines(torch, dev, chip)
    tokens, contexts, batches, decode_contexts = GRIDS[grid]
    started = time.perf_counter()
    eng, config = _engine(torch, dev, shape, GRIDS[grid], dtype)
    rng = random.Random(0)
    threads = torch.get_num_threads()
    if clock == "thread":
        torch.set_num_threads(1)  # the op runs on the timed thread (as the bench's executor serves)
    total, done = rounds * (len(tokens) * len(contexts) + len(batches) * len(decode_contexts)), 0
    pre_runs = {(t, c): [] for t in tokens for c in contexts}
    dec_runs = {(b, c): [] for b in batches for c in decode_contexts}
    with torch.inference_mode():
        for _ in range(rounds):
            for point, outer, inner, runs in ((prefill_point, tokens, contexts, pre_runs),
                                              (decode_point, batches, decode_contexts, dec_runs)):
                for a in outer:
                    for c in inner:
                        point(torch, dev, eng, rng, a, c, reps, clock, runs[a, c])
                    done += len(inner)
                    if on_point:
                        on_point(done, total)
    torch.set_num_threads(threads)
    prefill = [[statistics.median(pre_runs[t, c]) for c in contexts] for t in tokens]
    decode = [[statistics.median(dec_runs[b, c]) for c in decode_contexts] for b in batches]
    prov = provenance(torch, dev, device_model)
    table = {
        "chip": chip_name, "tp": tp, "model": name, "weight_dtype": "bf16", "kv_dtype": "bf16",
        "prefill": {"sizes": list(tokens), "context_tokens": list(contexts), "seconds": prefill,
                    "repeats": reps * rounds},
        "decode": {"sizes": list(batches), "context_tokens": list(decode_contexts), "seconds": decode,
                   "repeats": reps * rounds},
        "measured_by": prov["measured_by"],
        "measured_at": prov["measured_at"],
        "engine": f"executor.engine ({config.backend}, {dtype}, block {BLOCK}, "
                  f"{'thread CPU time, 1 torch thread' if clock == 'thread' else 'wall clock'})",
        "device": device_model,
        "model_shape": {**asdict(shape), "dtype": dtype, "params": shape.params(),
                        "scenario_model": scenario_model(name, shape, dtype)},
    }
    return {"schema_version": 2, "kind": "chip", "chip": chip_name, "quick": grid == "quick",
            "provenance": prov, "rooflines": roof.as_dict(), "tables": [table],
            "duration_s": time.perf_counter() - started}
