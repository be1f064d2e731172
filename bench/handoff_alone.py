"""The PDD report's handoff microbenchmark, alone: one k-token handoff at one context, timed part by part.

in:  the bench model (``bench_serve.MODEL``), the line (rate, RTT, jitter), the tokens handed over
     (the report's 100), MD's context and the batch MD is decoding when the handoff lands
out: :func:`measure` — per part, the seconds of every repetition: ``wire`` (a final ``HandoffTokens`` of k
     token IDs from an endpoint in dc-a to one in dc-b across an in-process ``LinkEmulator``: its send →
     the receiver's handler), ``wait`` (MD, a thread decoding a batch step after step and looking at its
     inbox between steps as ``executor.roles.md`` does: the handoff's arrival → MD takes it) and
     ``extend`` (MD's one extend-decode forward over the k tokens, ``Engine.extend``, reading the whole
     context); ``total`` their sum per repetition; and :func:`payload` — the message's bytes vs the KV of
     the k tokens. Nothing else runs in the process: no prefills, no other transfers, one context length.

The report (100 tokens, a GPU): 1.5 KB vs 4,649 KB; recompute 305 ms mean, 321.4 ms max, 4.8 ms std.
"""

from __future__ import annotations

import queue
import random
import statistics
import threading
import time

PARTS = ("wire", "wait", "extend", "total")


def wire(tokens: int, reps: int, gbit_per_s: float, rtt_ms: float, jitter_ms: float, seed: int = 0) -> list[float]:
    """Seconds from sending a final k-token ``HandoffTokens`` to the receiver's handler, lone, ``reps`` times."""
    from executor.transport.base import PeerInfo
    from executor.transport.link import LinkEmulator
    from executor.transport.messages import HandoffTokens
    from executor.transport.shaping import LinkShape
    from executor.transport.tcp import Directory, TcpEndpoint

    directory = Directory()
    line = LinkEmulator("dc-a", "dc-b", LinkShape(gbit_per_s, rtt_ms=rtt_ms, jitter_ms=jitter_ms), seed=seed)
    address = line.start()
    directory.add_link("dc-a", "dc-b", address)
    directory.add_link("dc-b", "dc-a", address)
    ends = {}
    for name, dc in (("rld", "dc-a"), ("md", "dc-b")):
        ends[name] = TcpEndpoint(name, dc, directory)
        directory.add(PeerInfo(name, dc, ends[name].start()))
    landed: queue.Queue = queue.Queue()
    ends["md"].set_handler(lambda _src, msg: landed.put(time.time() - msg.sent_at_unix_s))
    out = []
    try:
        for i in range(reps + 1):  # the first opens the connection: not counted
            time.sleep(0.02)
            ends["rld"].send("md", HandoffTokens(f"r{i}", 1, [7] * tokens, True, tokens, "one-shot"), deadline_s=30)
            took = landed.get(timeout=30)
            if i:
                out.append(took)
    finally:
        for ep in ends.values():
            ep.close()
        line.close()
    return out


def md_side(tokens: int, context: int, batch: int, reps: int, seed: int = 0, device: str = "cpu",
            backend: str = "torch") -> tuple[list[float], list[float]]:
    """(wait, extend) seconds of ``reps`` handoffs landing at random moments on an MD decoding ``batch``
    other sequences of ``context`` tokens (0: idle, it waits on its inbox), each an extend-decode of
    ``tokens`` tokens (t0 and k − 1 relay tokens) over a ``context``-token prompt, on ``device`` with the
    engine's ``backend`` (torch, or triton on a GPU)."""
    from bench.serve_trace import MODEL
    from executor.engine import EngineConfig, SamplingParams
    from executor.engine.engine import Engine
    import torch

    rng = random.Random(seed)
    blocks = (batch + 2) * (context + tokens + 64) // 16 + 64
    engine = Engine.from_seed(MODEL, EngineConfig(backend=backend, block_size=16, num_blocks=blocks,
                                                  max_prefill_tokens=8192), seed=0, device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sampling = SamplingParams(max_new_tokens=10**6, stop_at_eos=False)
    prompt = [rng.randrange(256) for _ in range(context)]
    others = [engine.prefill([rng.randrange(256) for _ in range(context)], sampling).request for _ in range(batch)]
    inbox: queue.Queue = queue.Queue()
    waits, extends = [], []
    stop = threading.Event()

    def md_loop() -> None:  # executor.roles.md: messages between steps, a step while there is work
        while not stop.is_set():
            try:
                landed = inbox.get(timeout=0.5) if not others else inbox.get_nowait()
            except queue.Empty:
                if others:
                    engine.decode_step(others)
                continue
            waits.append(time.perf_counter() - landed)
            req = engine.prefill(prompt, sampling).request  # the prompt's KV, cached: as MD holds it
            t0 = time.perf_counter()
            engine.extend(req, [rng.randrange(256) for _ in range(tokens - 1)])
            sync()
            extends.append(time.perf_counter() - t0)
            engine.finish(req)

    worker = threading.Thread(target=md_loop, daemon=True)
    worker.start()
    try:
        inbox.put(time.perf_counter())  # a first one to warm the allocators: not counted
        while len(extends) < 1:
            time.sleep(0.01)
        waits.clear(), extends.clear()
        for _ in range(reps):
            time.sleep(rng.uniform(0.05, 0.15))
            n = len(extends)
            inbox.put(time.perf_counter())
            while len(extends) == n:
                time.sleep(0.002)
    finally:
        stop.set()
        worker.join(5)
    return waits, extends


def measure(tokens: int = 100, context: int = 1500, batch: int = 0, reps: int = 30, gbit_per_s: float = 0.2,
            rtt_ms: float = 30.0, jitter_ms: float = 5.0, seed: int = 0, device: str = "cpu",
            backend: str = "torch") -> dict[str, list[float]]:
    """Each part's seconds over ``reps`` handoffs (``total``: their sum, repetition by repetition)."""
    import torch

    torch.set_num_threads(1)
    w = wire(tokens, reps, gbit_per_s, rtt_ms, jitter_ms, seed)
    waits, extends = md_side(tokens, context, batch, reps, seed, device, backend)
    return {"wire": w, "wait": waits, "extend": extends, "total": [a + b + c for a, b, c in zip(w, waits, extends)]}


def stats(xs: list[float]) -> dict[str, float]:
    """mean / max / std (population) of ``xs``, in ms."""
    return {"mean": 1e3 * statistics.mean(xs), "max": 1e3 * max(xs), "std": 1e3 * statistics.pstdev(xs)}
