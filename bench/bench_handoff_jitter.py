"""Where the token-ID handoff latency goes: wire, wait at MD, extend-decode — per handoff.

    python bench/bench_handoff_jitter.py [--seeds 0,1] [--jitter-ms 5] [--gbit-per-s 0.2] [--rtt-ms 30]

Serves bench_serve.py's quick trace with its PDD setup (P and RLD in dc-a, MD in dc-b behind a
shaped line, everything in this process on the CPU) once per seed, and splits the latency
bench_serve prints ("final batch sent → MD streams on") of every final handoff batch into:
- wire: RLD's send → the message in MD's inbox (TCP, the line's RTT/2 + jitter, its token
  bucket shared with the KV transfers on the same direction, the threads' wake-ups);
- wait: inbox → MD handles it (the engine step MD is running, messages ahead of it);
- extend: MD's one extend-decode forward over the handed-off tokens (reads the whole prefix).
Prints mean / max / std of each and of the total. The split is measured by wrapping
`RoleWorker._on_message` and `MainWorker.on_handoff` here; the roles are unchanged.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_serve  # noqa: E402 - the trace, setups and serving loop of the serving bench

from executor.roles import common  # noqa: E402
from executor.roles.md import MainWorker  # noqa: E402
from executor.transport.messages import HandoffTokens  # noqa: E402


def instrument(rows: list[dict]) -> None:
    """Record, per final handoff batch, when it reached MD's inbox and how long MD's handling took."""
    arrived: dict[str, float] = {}
    on_message, on_handoff = common.RoleWorker._on_message, MainWorker.on_handoff

    def timed_message(self, src, msg):
        if isinstance(msg, HandoffTokens) and msg.final:
            arrived[msg.request_id] = time.time()
        return on_message(self, src, msg)

    def timed_handoff(self, src, h):
        start, t0 = time.time(), time.perf_counter()
        out = on_handoff(self, src, h)
        if h.final and h.request_id in arrived:
            inbox = arrived.pop(h.request_id)
            rows.append({"wire": inbox - h.sent_at_unix_s, "wait": start - inbox,
                         "extend": time.perf_counter() - t0, "tokens": len(h.tokens)})
        return out

    common.RoleWorker._on_message = timed_message
    MainWorker.on_handoff = timed_handoff


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--gbit-per-s", type=float, default=0.2)
    ap.add_argument("--rtt-ms", type=float, default=30.0)
    ap.add_argument("--jitter-ms", type=float, default=5.0)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    sys.setswitchinterval(0.001)
    rows: list[dict] = []
    instrument(rows)
    line = bench_serve.LinkShape(args.gbit_per_s, args.rtt_ms, args.jitter_ms, 0.0)
    for seed in (int(s) for s in args.seeds.split(",")):
        trace = bench_serve.make_trace(bench_serve.QUICK, seed)
        bench_serve.serve("pdd", trace, line, bench_serve.engine_config(trace), seed)
    if not rows:
        print("no handoff happened")
        return 1
    for r in rows:
        r["total"] = r["wire"] + r["wait"] + r["extend"]
    print(f"{len(rows)} handoffs, {statistics.mean(r['tokens'] for r in rows):.0f} tokens each on average")
    for key in ("wire", "wait", "extend", "total"):
        xs = [1e3 * r[key] for r in rows]
        print(f"  {key:<7} mean {statistics.mean(xs):7.1f} ms  max {max(xs):7.1f} ms  "
              f"std {statistics.pstdev(xs):6.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
