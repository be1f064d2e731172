"""Where the token-ID handoff latency goes: wire, wait at MD, extend-decode — served, and alone.

    python bench/bench_handoff_jitter.py [--seeds 0,1] [--alone-only] [--tokens 100] [--context 1500]
        [--batch 0] [--reps 30] [--jitter-ms 5] [--gbit-per-s 0.2] [--rtt-ms 30]
        [--device cpu] [--backend torch] [--json OUT]

Served: bench_serve.py's quick trace with its PDD setup (P and RLD in dc-a, MD in dc-b behind a
shaped line, everything in this process on the CPU) once per seed; every final handoff batch's
latency ("final batch sent → MD extended it") split into
- wire: RLD's send → the message in MD's inbox (TCP, the line's RTT/2 + jitter, its token
  bucket shared with the KV transfers on the same direction, the threads' wake-ups);
- wait: inbox → MD handles it (the engine step MD is running, messages ahead of it);
- extend: MD's one extend-decode forward over the handed-off tokens (reads the whole prefix).
(`bench/serve_handoff.instrument`: `RoleWorker._on_message` and `MainWorker.on_handoff` wrapped.)

Alone (the PDD report's microbenchmark, `bench/handoff_alone.py`): a `--tokens`-token handoff (the
report's 100) at one context (`--context`), `--reps` times with nothing else in the process: its
message across an in-process emulated line (wire), MD's wait with `--batch` other sequences decoding
(0: idle), its extend-decode; and the message's bytes vs the KV of the tokens (the report: 1.5 KB vs
4,649 KB; recompute 305 ms mean, 321.4 ms max, 4.8 ms std on a GPU).
Prints mean / max / std of each part and of the total.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_serve, handoff_alone, serve_handoff  # noqa: E402


def _row(key: str, xs_ms: list[float]) -> str:
    return (f"  {key:<7} mean {statistics.mean(xs_ms):7.1f} ms  max {max(xs_ms):7.1f} ms  "
            f"std {statistics.pstdev(xs_ms):6.1f} ms")


def served(seeds: list[int], line) -> list[dict]:
    """The split rows of every final handoff batch of the PDD setup serving the quick trace per seed."""
    rows: list[dict] = []
    for seed in seeds:
        trace = bench_serve.make_trace(bench_serve.QUICK, seed)
        rows += bench_serve.serve("pdd", trace, line, bench_serve.engine_config(trace), seed)["handoff_split"]
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--alone-only", action="store_true", help="only the microbenchmark, no serving")
    ap.add_argument("--tokens", type=int, default=100, help="tokens handed over in the microbenchmark")
    ap.add_argument("--context", type=int, default=1500, help="MD's context in the microbenchmark")
    ap.add_argument("--batch", type=int, default=0, help="sequences MD decodes when the handoff lands")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--gbit-per-s", type=float, default=0.2)
    ap.add_argument("--rtt-ms", type=float, default=30.0)
    ap.add_argument("--jitter-ms", type=float, default=5.0)
    ap.add_argument("--device", default="cpu", help="the microbenchmark's MD engine: cpu or cuda")
    ap.add_argument("--backend", default="torch", help="its kernels: torch, or triton on a GPU")
    ap.add_argument("--json", type=Path, help="also write the figures here (ms)")
    args = ap.parse_args(argv)
    for name in ("tokens", "context", "reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.batch < 0:
        ap.error(f"--batch must be 0 or more, got {args.batch}")
    import torch

    torch.set_num_threads(1)
    sys.setswitchinterval(0.001)
    line = bench_serve.LinkShape(args.gbit_per_s, args.rtt_ms, args.jitter_ms, 0.0)
    failed = False
    figures: dict = {"args": vars(args) | {"json": str(args.json)}}
    if not args.alone_only:
        rows = served([int(s) for s in args.seeds.split(",")], line)
        if rows:
            modes = ", ".join(f"{m} {sum(r['mode'] == m for r in rows)}" for m in serve_handoff.MODES)
            print(f"served: {len(rows)} handoffs ({modes}), "
                  f"{statistics.mean(r['tokens'] for r in rows):.0f} tokens in the final batch on average")
            for key in serve_handoff.PARTS:
                print(_row(key, [1e3 * r[key] for r in rows]))
            figures["served"] = {key: handoff_alone.stats([r[key] for r in rows]) for key in serve_handoff.PARTS}
        else:
            print("served: no handoff happened")
            failed = True
    pay = serve_handoff.payload(args.tokens)
    parts = handoff_alone.measure(args.tokens, args.context, args.batch, args.reps, args.gbit_per_s, args.rtt_ms,
                                  args.jitter_ms, device=args.device, backend=args.backend)
    print(f"alone: a {args.tokens}-token handoff at a {args.context}-token context, MD decoding {args.batch} other "
          f"sequences, {args.reps} times; token IDs {pay['id_bytes'] / 1e3:.1f} KB vs the KV they replace "
          f"{pay['kv_bytes'] / 1e3:,.0f} KB ({pay['ratio']:,.0f}x; the report: 1.5 KB vs 4,649 KB)")
    for key in handoff_alone.PARTS:
        print(_row(key, [1e3 * x for x in parts[key]]))
    print("  (the report, a GPU: recompute 305 ms mean, 321.4 ms max, 4.8 ms std)")
    figures["alone"] = {key: handoff_alone.stats(parts[key]) for key in handoff_alone.PARTS} | {"payload": pay}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
