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
stand-in model, as bench_serve's does); ``engine`` and ``model_shape.dtype`` say float32.
A prefill point (T, C) first caches a C-token prefix, then times
``Engine.prefill`` of that prefix + T fresh tokens (only the T new tokens are forwarded; a
fresh suffix each run, so nothing of the timed part is cached). A decode point (B, L)
prefills B distinct L-token prompts, then times ``Engine.decode_step`` over all B. The
times are the engine's whole call (scheduling, KV bookkeeping, sampling included), as a
serving engine pays them. On the CPU they are, by default, the timing thread's CPU time
with torch on one thread (``clock="thread"``): the seconds of one core, which other work
on a shared machine does not inflate as it does wall time (memory-bandwidth contention
still shows); ``placer.sim.runtime.Host`` turns them back into wall seconds for the cores
a deployment shares. The ``serve`` grid covers ``bench/bench_serve.py``'s trace.

The shape: a catalog model gives layers, hidden, heads, head dim, vocabulary and whether the
LM head is the embedding; the catalog has no FFN width, so ``intermediate`` is the one its
parameter count implies (:func:`ffn_width`: 14336 for Llama-3.1-8B, 8192 for Llama-3.2-1B,
28672 for the 70Bs, 11008 for Llama-2-7B, as their configs say), so a table measured for a
catalog name is that model's shape and the roofline it is compared with reads the same
bytes. Any override (a smaller model for the CPU, say) changes the table's model name to
``llama-tiny-<hash of the shape>``; the profile's ``model_shape.scenario_model`` is the
inline model a scenario names to use it (docs/profiles.md).

:func:`between_grid` and :func:`measure_points` time points between a grid's (the held-out
points of ``bench/bench_engine_estimate.py``) with the same engine and the same rules.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import statistics
import time
from dataclasses import asdict, dataclass

from placer.catalog import get_model
from placer.errors import InputError

LLAMA3_FFN_RATIO = 3.5  # intermediate / hidden of Llama-3 (14336 / 4096): when the parameter count gives none
LLAMA3_VOCAB = 128256
FFN_ROUND = 256  # Llama configs' FFN widths are multiples of 256
GRIDS = {
    "tiny": ((8, 32), (0, 32), (1, 2), (16, 64)),  # a smoke check (tests): seconds on a tiny shape
    # (prefill new tokens, prefill cached context), (decode batch, decode context)
    "quick": ((16, 64, 256), (0, 256), (1, 4, 16), (64, 512)),
    "full": ((128, 512, 2048, 8192), (0, 2048, 8192), (1, 8, 32, 128), (512, 2048, 8192)),
    # bench/bench_serve.py's trace on the CPU: prompts up to ~1.6K tokens (cold, or a few dozen new
    # over a cached context), decode batches up to ~10 at contexts up to ~1.9K
    "serve": ((16, 64, 256, 1024, 2048), (0, 512, 2048), (1, 2, 4, 8, 16), (256, 1024, 2048)),
    # a GPU of 80 GB or more with an 8B-class model in bf16 (bench/gpu_check.sh): the KV of 64 sequences
    # of 4K tokens (34 GB) beside 16 GB of weights; prompts to 8K new tokens after 8K cached
    "gpu": ((128, 512, 2048, 8192), (0, 2048, 8192), (1, 8, 32, 64), (512, 2048, 4096)),
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
    tied_embeddings: bool = False  # the LM head is the embedding matrix (Llama-3.2-1B)

    def params(self) -> int:
        attn = self.hidden_size * self.head_dim * (2 * self.num_q_heads + 2 * self.num_kv_heads)
        mlp = 3 * self.hidden_size * self.intermediate_size
        embeddings = (1 if self.tied_embeddings else 2) * self.vocab_size * self.hidden_size
        return self.num_layers * (attn + mlp) + embeddings

    def digest(self) -> str:
        fields = asdict(self)
        if not self.tied_embeddings:
            del fields["tied_embeddings"]  # the names of untied shapes measured before the field existed
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:8]


ENGINE_DTYPES = ("bfloat16", "float32")


def ffn_width(m) -> int:
    """The FFN width a dense Llama-architecture catalog model's parameter count implies: (total −
    embeddings) / layers − attention, over the three FFN matrices, to a multiple of 256; 3.5 × hidden
    where the count is unknown or implies a width outside 2-6 × hidden."""
    vocab = m.vocab or LLAMA3_VOCAB
    embeddings = (1 if m.tied_embeddings else 2) * vocab * m.hidden
    attention = m.hidden * m.head_dim * 2 * (m.q_heads + m.kv_heads)
    per_layer = (m.params_total_b * 1e9 - embeddings) / m.layers - attention
    width = round(per_layer / (3 * m.hidden) / FFN_ROUND) * FFN_ROUND
    if m.params_total_b > 0 and 2 * m.hidden <= width <= 6 * m.hidden:
        return width
    return round(LLAMA3_FFN_RATIO * m.hidden / FFN_ROUND) * FFN_ROUND


def shape_for(model: str, overrides: dict) -> tuple[str, Shape]:
    """(table model name, shape) for a catalog model with optional overrides (None = keep)."""
    try:
        m = get_model(model)
    except (KeyError, ValueError) as e:
        raise InputError(f"--model: {e}") from None
    if m.attn != "gqa":
        raise InputError(f"--model {model!r}: only Llama-architecture (gqa) models run on the executor's engine")
    base = Shape(m.layers, m.hidden, m.q_heads, m.kv_heads, m.head_dim, ffn_width(m), m.vocab or LLAMA3_VOCAB,
                 m.tied_embeddings)
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
    # a decode point holds its batch at the longest context; a prefill point a cached prefix and its prompt
    blocks = (max(batches) + 2) * (max(decode_contexts) // BLOCK + 2) + 2 * (max(tokens) + max(contexts)) // BLOCK + 64
    config = EngineConfig(backend="triton" if device.type == "cuda" else "torch", block_size=BLOCK,
                          num_blocks=blocks, max_running_requests=max(batches) + 2,
                          max_prefill_tokens=max(tokens) + max(contexts) + BLOCK)
    model = ModelConfig(vocab_size=shape.vocab_size, num_layers=shape.num_layers, hidden_size=shape.hidden_size,
                        num_q_heads=shape.num_q_heads, num_kv_heads=shape.num_kv_heads, head_dim=shape.head_dim,
                        intermediate_size=shape.intermediate_size, dtype=dtype,
                        tie_word_embeddings=shape.tied_embeddings)
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


def _midpoints(values) -> tuple[int, ...]:
    """A point between each two neighbours: the geometric mean (the table interpolates in log space),
    half the upper one after a zero."""
    return tuple(round(math.sqrt(a * b)) if a > 0 else b // 2 for a, b in zip(values, values[1:]))


def between_grid(grid: str) -> tuple:
    """The points between ``GRIDS[grid]``'s, in the same form: each axis' midpoints (a table
    measured on the grid answers them by interpolation only)."""
    if grid not in GRIDS:
        raise InputError(f"--grid must be one of {', '.join(GRIDS)}, got {grid!r}")
    return tuple(_midpoints(axis) for axis in GRIDS[grid])


def measure_points(torch, device, eng, rng, prefill: list[tuple[int, int]], decode: list[tuple[int, int]],
                   reps: int, clock: str) -> dict:
    """Seconds of each prefill point (new tokens, cached context) and decode point (batch, context)
    on ``eng``, timed as the grid is. Returns ``{"prefill": [{"tokens", "context", "seconds"}],
    "decode": [{"batch", "context", "seconds"}]}``."""
    args = (torch, device, eng, rng)
    return {"prefill": [{"tokens": t, "context": c, "seconds": prefill_point(*args, t, c, reps, clock)}
                        for t, c in prefill],
            "decode": [{"batch": b, "context": c, "seconds": decode_point(*args, b, c, reps, clock)}
                       for b, c in decode]}


def profile_model(device: str = "cpu", model: str = "llama-3.1-8b", tp: int = 1, grid: str = "quick",
                  chip: str | None = None, reps: int = 3, overrides: dict | None = None, on_point=None,
                  dtype: str | None = None, name: str | None = None, clock: str | None = None,
                  rounds: int = 1, then=None) -> dict:
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
    there, with torch on one thread as the executor serves).

    ``then``: called after the grid with ``measure(prefill, decode)``, which times other points on the
    same engine the same way (:func:`measure_points`; ``bench/bench_engine_estimate.py``'s held-out
    points: no second engine to build, which for an 8B shape is a minute of random weights)."""
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
        if then is not None:
            then(lambda prefill, decode: measure_points(torch, dev, eng, rng, prefill, decode, reps, clock))
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
