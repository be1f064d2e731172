"""TPOT of running decodes while a long prompt arrives: the engine with and without chunked prefill.

    python bench/bench_chunked_prefill.py [--prompt-tokens 4096] [--chunks 256,512,1024] [--decodes 8]
                                          [--device cpu] [--backend torch] [--json OUT]

What runs: one `Engine` (a seeded Llama of ~30M parameters, so a forward's cost grows with its
tokens as a real model's does) serving `--decodes` short requests through `submit`/`step`; once
they decode, a prompt of `--prompt-tokens` arrives. Without chunking the scheduler runs it
whole in a forward of its own, and every running request waits for it; with
`chunked_prefill_tokens` C each step carries the decodes plus at most C prompt tokens.

Prints, per setting, the inter-token gaps of the running requests while the long prompt is
prefilled (its steps and the step after its first token, where an unchunked prompt's stall
lands: TPOT P50 / P90 / max, in ms), the P90 over the running requests of their mean TPOT from
the prompt's arrival to their end, the long prompt's TTFT and the steps it took. The
planner's A model (`placer.aggregated`) assumes the chunked behaviour: TPOT = one mixed step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams

MODEL = ModelConfig(num_layers=8, hidden_size=512, num_q_heads=8, num_kv_heads=4, head_dim=64,
                    intermediate_size=1536)


def run(chunk: int | None, prompt_tokens: int, decodes: int, device: str, backend: str) -> dict:
    """Serve the decodes, submit the long prompt once they decode; the gaps they saw after it came."""
    config = EngineConfig(backend=backend, block_size=16, num_blocks=(prompt_tokens + decodes * 200) // 16 + 64,
                          max_running_requests=decodes + 1, chunked_prefill_tokens=chunk)
    engine = Engine.from_seed(MODEL, config, seed=0, device=device)
    decode_params = SamplingParams(max_new_tokens=96, stop_at_eos=False)
    running = [engine.submit([256, *(i + k for k in range(31))], decode_params) for i in range(decodes)]
    while not all(r.output_ids for r in running):
        engine.step()
    for _ in range(4):  # warm steady decode
        engine.step()
    long = engine.submit([256, *(k % 256 for k in range(prompt_tokens - 1))],
                         SamplingParams(max_new_tokens=8, stop_at_eos=False))
    arrived = time.perf_counter()
    last = {id(r): arrived for r in running}
    whole: dict[int, list[float]] = {id(r): [] for r in running}
    window, ttft_s, long_steps, after_t0 = [], None, 0, 0
    while engine.scheduler.has_work() and any(r.num_generated < decode_params.max_new_tokens for r in running):
        stepped = dict(engine.step())
        now = time.perf_counter()
        if ttft_s is None:
            long_steps += 1
            if long in stepped:
                ttft_s = now - arrived
        else:
            after_t0 += 1
        for r in [r for r in running if r in stepped]:
            whole[id(r)].append(now - last[id(r)])
            if after_t0 <= 1:  # the prompt's steps and the one after (where an unchunked stall lands)
                window.append(now - last[id(r)])
            last[id(r)] = now
    ms = sorted(g * 1e3 for g in window)
    per_request_ms = sorted(statistics.mean(g) * 1e3 for g in whole.values())
    return {"chunked_prefill_tokens": chunk, "tpot_p50_ms": statistics.median(ms),
            "tpot_p90_ms": ms[int(0.9 * (len(ms) - 1))], "tpot_max_ms": ms[-1],
            "request_tpot_p90_ms": per_request_ms[int(0.9 * (len(per_request_ms) - 1))],
            "long_prompt_ttft_s": ttft_s, "long_prompt_steps": long_steps, "window_tokens": len(ms)}

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt-tokens", type=int, default=4096)
    ap.add_argument("--chunks", default="256,512,1024", help="chunk sizes to compare with no chunking")
    ap.add_argument("--decodes", type=int, default=8)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default="torch", choices=["torch", "triton"])
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads on the CPU")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = [run(c, args.prompt_tokens, args.decodes, args.device, args.backend)
            for c in [None, *(int(c) for c in args.chunks.split(","))]]
    print(f"{args.decodes} running decodes, a {args.prompt_tokens}-token prompt arrives "
          f"({args.device}, {args.backend})")
    print(f"{'chunk':>8} {'TPOT p50 ms':>12} {'TPOT p90 ms':>12} {'TPOT max ms':>12} {'req TPOT p90':>13} "
          f"{'long TTFT s':>12} {'steps':>6}")
    for r in rows:
        print(f"{r['chunked_prefill_tokens'] or 'none':>8} {r['tpot_p50_ms']:>12.1f} {r['tpot_p90_ms']:>12.1f} "
              f"{r['tpot_max_ms']:>12.1f} {r['request_tpot_p90_ms']:>13.1f} {r['long_prompt_ttft_s']:>12.2f} "
              f"{r['long_prompt_steps']:>6}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
