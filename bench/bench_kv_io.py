"""The engine's KV moves and decode step on the CPU, alone and beside decoding engines.

    python bench/bench_kv_io.py [--tokens 1300] [--context 1536] [--reps 20] [--beside 0,2]

bench_serve.py's model (32 KiB of KV per token), one thread per engine, torch.set_num_threads(1), as
bench_serve serves. For each number of neighbour threads (each an engine stepping two 1200-token
sequences without end), times in thread CPU and wall milliseconds (median / p90 / max of ``--reps``):
- export: ``export_kv`` + ``KVPayload.to_bytes`` of a ``--tokens``-token prompt (P's thread, per pull),
  and ``to_bytes`` alone;
- import: ``KVPayload.from_bytes(copy=False)`` + ``write_kv`` of those bytes (the decoder's thread, as
  it reads a payload: views of the bytes; written back into the request's own blocks), and
  ``from_bytes`` alone, with its copy and as views;
- safetensors save / load: the same tensors through ``safetensors.torch`` (what the payload was
  written and read with before 2026-12-03), the baseline measured in the same run;
- decode step: one sequence of ``--context`` tokens.
The lines ending in "x" are the ratios of safetensors' medians to the payload's in the same run (to_bytes
against save: both make the bytes from the tensors; from_bytes against load: both make tensors from the
bytes). On a Firecracker VM a fresh page costs a fault on the host: the export's two fresh buffers (the
gathered KV, the bytes) are most of its time and all of its spread.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_serve  # noqa: E402 - the bench's model and engine configuration


def _timed(fn, reps: int) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    for _ in range(reps):
        c0, t0 = time.thread_time(), time.perf_counter()
        fn()
        cpu.append(1000 * (time.thread_time() - c0))
        wall.append(1000 * (time.perf_counter() - t0))
    return cpu, wall


def _summary(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.1f} {bench_serve.pct(xs, 90):7.1f} {max(xs):7.1f}"


def measure(tokens: int, context: int, reps: int, beside: int) -> dict[str, tuple[list[float], list[float]]]:
    from safetensors.torch import load as st_load
    from safetensors.torch import save as st_save

    from executor.engine import Engine, KVPayload, SamplingParams
    from executor.engine.model import init_weights

    trace = bench_serve.make_trace(bench_serve.FULL, 0)
    ec = bench_serve.engine_config(trace)
    weights = init_weights(bench_serve.MODEL, 0)
    rng = random.Random(0)
    endless = SamplingParams(max_new_tokens=1 << 30, stop_at_eos=False)

    def engine_with(n: int, length: int):
        e = Engine(bench_serve.MODEL, ec, weights, "cpu")
        return e, [e.prefill([rng.randrange(256) for _ in range(length)], endless).request for _ in range(n)]

    stop = threading.Event()

    def neighbour() -> None:
        e, reqs = engine_with(2, 1200)
        while not stop.is_set():
            e.decode_step(reqs)

    src, (req,) = engine_with(1, tokens)
    step_engine, step_reqs = engine_with(1, context)
    blob = src.export_kv(req, 0, tokens).to_bytes()
    payload = KVPayload.from_bytes(blob)
    tensors = {"k": payload.k, "v": payload.v}
    st_blob = st_save(tensors)
    threads = [threading.Thread(target=neighbour, daemon=True) for _ in range(beside)]
    for t in threads:
        t.start()
    time.sleep(1.0 if beside else 0.0)  # the neighbours are stepping
    out: dict[str, tuple[list[float], list[float]]] = {}
    try:
        def write() -> None:  # into the request's own blocks: the same bytes, the whole cost of the write
            p = KVPayload.from_bytes(blob, copy=False)  # as the decoders read it
            src.runner.write_kv(list(req.block_ids), 0, p.k, p.v)

        out["export"] = _timed(lambda: src.export_kv(req, 0, tokens).to_bytes(), reps)
        out["to_bytes"] = _timed(payload.to_bytes, reps)
        out["import"] = _timed(write, reps)
        out["from_bytes"] = _timed(lambda: KVPayload.from_bytes(blob), reps)
        out["from_bytes view"] = _timed(lambda: KVPayload.from_bytes(blob, copy=False), reps)
        out["safetensors save"] = _timed(lambda: st_save(tensors), reps)
        out["safetensors load"] = _timed(lambda: st_load(st_blob), reps)
        out["decode step"] = _timed(lambda: step_engine.decode_step(step_reqs), reps)
    finally:
        stop.set()
        for t in threads:
            t.join()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=1300, help="prompt tokens whose KV is exported and imported")
    ap.add_argument("--context", type=int, default=1536, help="context of the timed decode step")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--beside", default="0,2", help="numbers of neighbour decoding threads, comma-separated")
    args = ap.parse_args(argv)
    try:
        besides = [int(x) for x in args.beside.split(",")]
    except ValueError:
        ap.error(f"--beside must be integers separated by commas, got {args.beside!r}")
    for name, value in (("--tokens", args.tokens), ("--context", args.context), ("--reps", args.reps)):
        if value < 1:
            ap.error(f"{name} must be at least 1, got {value}")
    if any(b < 0 for b in besides):
        ap.error(f"--beside must not be negative, got {args.beside!r}")
    import torch

    torch.set_num_threads(1)
    print(f"KV of {args.tokens} tokens ({args.tokens * 32} KiB), a decode step at {args.context} tokens; "
          f"ms over {args.reps} runs")
    for beside in besides:
        out = measure(args.tokens, args.context, args.reps, beside)
        print(f"beside {beside} decoding engine thread(s):")
        print(f"  {'':18} {'CPU median':>10} {'p90':>7} {'max':>7}   {'wall median':>11} {'p90':>7} {'max':>7}")
        for name, (cpu, wall) in out.items():
            print(f"  {name:18} {_summary(cpu):>26}   {_summary(wall):>27}")
        for ours, theirs in (("to_bytes", "safetensors save"), ("from_bytes", "safetensors load")):
            ratio = statistics.median(out[theirs][1]) / statistics.median(out[ours][1])
            print(f"  {theirs} / {ours} (wall medians): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
