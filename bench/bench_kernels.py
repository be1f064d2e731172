#!/usr/bin/env python
"""Benchmark the Triton kernels: median time, achieved GB/s and TFLOP/s against device peaks,
and time against torch SDPA doing the same attention (the torch reference for rms_norm / rope).

    python bench/bench_kernels.py [--quick] [--device cuda|cpu] [--sweep] [--json-out PATH]

On CUDA: triton.testing.do_bench (median, L2 flushed between reps) and Hopper-sized shapes:
decode at long context (memory bound; target >= 80 % of HBM bandwidth), extend of 512 new tokens
over a long prefix (target <= 1.2x SDPA with an explicit mask), prefill at 4-16K. ``--sweep``
also times tile / warp / stage / split variants of the attention kernels. On the CPU the kernels
run in the Triton interpreter on tiny shapes: the numbers only show that the bench still runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[1]

H200_PEAK_BYTES_PER_S = 4.8e12
H200_PEAK_BF16_FLOP_PER_S = 989e12


@dataclass
class Row:
    kernel: str
    shape: str
    dtype: str
    ms: float | None = None
    bytes_moved: float = 0.0
    flops: float = 0.0
    gb_per_s: float | None = None
    frac_peak_bw: float | None = None
    tflop_per_s: float | None = None
    frac_peak_flop: float | None = None
    baseline: str = ""
    baseline_ms: float | None = None
    ratio_to_baseline: float | None = None
    extra: dict = field(default_factory=dict)
    max_abs_err: float | None = None
    error: str = ""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer shapes")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when present)")
    parser.add_argument("--sweep", action="store_true", help="also time kernel config variants (GPU)")
    parser.add_argument("--json-out", type=Path, default=None, help="write all rows as JSON here")
    parser.add_argument("--peak-bytes-per-s", type=float, default=H200_PEAK_BYTES_PER_S,
                        help="device memory bandwidth peak, B/s (default: H200 HBM3e)")
    parser.add_argument("--peak-flop-per-s", type=float, default=H200_PEAK_BF16_FLOP_PER_S,
                        help="device dense bf16 peak, FLOP/s (default: H200)")
    parser.add_argument("--cpu-reps", type=int, default=3, help="timed repetitions on the CPU")
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- timing


def make_timer(device, cpu_reps: int) -> Callable[[Callable[[], object]], float]:
    """Median milliseconds of fn(): do_bench on CUDA (L2 flushed per rep), wall clock on the CPU."""
    if device.type == "cuda":
        from triton.testing import do_bench

        def cuda_time(fn):
            return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))

        return cuda_time

    def cpu_time(fn):
        fn()  # warm-up (compilation / first-touch)
        times = []
        for _ in range(cpu_reps):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    return cpu_time


def finish(row: Row, ms: float, peak_bw: float, peak_flop: float) -> Row:
    row.ms = ms
    if row.bytes_moved:
        row.gb_per_s = row.bytes_moved / (ms * 1e-3) / 1e9
        row.frac_peak_bw = row.bytes_moved / (ms * 1e-3) / peak_bw
    if row.flops:
        row.tflop_per_s = row.flops / (ms * 1e-3) / 1e12
        row.frac_peak_flop = row.flops / (ms * 1e-3) / peak_flop
    if row.baseline_ms:
        row.ratio_to_baseline = ms / row.baseline_ms
    return row


# --------------------------------------------------------------------------- cases


def paged_cache(torch, batch, tokens, block_size, hkv, head_dim, dtype, device, seed):
    """K/V caches with `tokens` tokens per sequence in shuffled blocks, and the page table."""
    gen = torch.Generator(device=device).manual_seed(seed)
    blocks_per_seq = math.ceil(tokens / block_size)
    num_blocks = batch * blocks_per_seq + 1
    shape = (num_blocks, block_size, hkv, head_dim)
    k_cache = torch.randn(shape, device=device, dtype=dtype, generator=gen)
    v_cache = torch.randn(shape, device=device, dtype=dtype, generator=gen)
    order = torch.randperm(num_blocks, device=device, generator=gen)[: batch * blocks_per_seq]
    page_table = order.view(batch, blocks_per_seq).to(torch.int32).contiguous()
    return k_cache, v_cache, page_table


def gather_dense(torch, cache, page_table, tokens):
    """[B, H, tokens, D] contiguous copy of each sequence's first `tokens` cached tokens."""
    batch = page_table.shape[0]
    blocks = cache[page_table.long()]  # [B, nblk, bs, H, D]
    return blocks.reshape(batch, -1, cache.shape[2], cache.shape[3])[:, :tokens].transpose(1, 2).contiguous()


def sdpa(torch, q, k, v, **kw):
    """SDPA with GQA; expands kv heads when the backend refuses enable_gqa."""
    F = torch.nn.functional
    group = q.shape[1] // k.shape[1]
    if group == 1:
        return lambda: F.scaled_dot_product_attention(q, k, v, **kw)
    try:
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)
        return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)
    except (RuntimeError, TypeError):
        ke, ve = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        return lambda: F.scaled_dot_product_attention(q, ke, ve, **kw)


def bench_decode(ctx, batch, tokens, block_size, hq=32, hkv=8, head_dim=128):
    torch, dev, dtype = ctx.torch, ctx.device, ctx.dtype
    from placer_kernels.decode_attention import decode_attention

    row = Row("decode", f"B={batch} L={tokens} Hq={hq} Hkv={hkv} D={head_dim} page={block_size}", str(dtype))
    k_cache, v_cache, page_table = paged_cache(torch, batch, tokens, block_size, hkv, head_dim, dtype, dev, 1)
    q = torch.randn(batch, hq, head_dim, device=dev, dtype=dtype)
    seq_lens = torch.full((batch,), tokens, dtype=torch.int32, device=dev)
    scale = head_dim**-0.5
    elem = k_cache.element_size()
    row.bytes_moved = 2 * batch * tokens * hkv * head_dim * elem + 2 * q.numel() * elem + page_table.numel() * 4
    row.flops = 4 * batch * tokens * hq * head_dim
    ours = lambda: decode_attention(q, k_cache, v_cache, page_table, seq_lens, scale)  # noqa: E731
    out = ours()
    k_dense = gather_dense(torch, k_cache, page_table, tokens)
    v_dense = gather_dense(torch, v_cache, page_table, tokens)
    base = sdpa(torch, q[:, :, None, :], k_dense, v_dense, scale=scale)
    row.max_abs_err = float((out.float() - base()[:, :, 0].float()).abs().max())
    row.baseline, row.baseline_ms = "sdpa(gathered K/V)", ctx.timer(base)
    del k_dense, v_dense
    ms = ctx.timer(ours)
    if ctx.sweep:
        ctx.sweep_rows += sweep_decode(ctx, row, q, k_cache, v_cache, page_table, seq_lens, scale)
    return finish(row, ms, ctx.peak_bw, ctx.peak_flop)


def sweep_decode(ctx, row, q, k_cache, v_cache, page_table, seq_lens, scale):
    from placer_kernels import decode_attention as mod

    default = mod.default_config(q.device, q.shape[-1])
    auto = mod.auto_num_splits(q.shape[0], k_cache.shape[2], page_table.shape[1] * k_cache.shape[1], q.device)
    variants = []
    for block_n in (32, 64, 128):
        for warps in (4, 8):
            for stages in (2, 3, 4):
                variants.append((mod.DecodeConfig(block_n, warps, stages), auto))
    for splits in (1, 2, 4, 8, 16, 32):
        variants.append((default, splits))
    rows = []
    for cfg, splits in variants:
        r = Row("decode-sweep", row.shape, row.dtype, bytes_moved=row.bytes_moved, flops=row.flops,
                extra={"config": asdict(cfg), "num_splits": splits, "auto_splits": auto})
        try:
            fn = lambda: mod.launch(q, k_cache, v_cache, page_table, seq_lens, scale, splits, cfg)  # noqa: E731
            fn()
            rows.append(finish(r, ctx.timer(fn), ctx.peak_bw, ctx.peak_flop))
        except Exception as exc:  # a config the compiler rejects (shared memory) is a result too
            r.error = f"{type(exc).__name__}: {str(exc)[:120]}"
            rows.append(r)
    return rows


def bench_extend(ctx, batch, extend, prefix, block_size=16, hq=32, hkv=8, head_dim=128):
    torch, dev, dtype = ctx.torch, ctx.device, ctx.dtype
    from placer_kernels.extend_attention import extend_attention

    row = Row("extend", f"B={batch} E={extend} P={prefix} Hq={hq} Hkv={hkv} D={head_dim} page={block_size}", str(dtype))
    total = prefix + extend
    k_cache, v_cache, page_table = paged_cache(torch, batch, total, block_size, hkv, head_dim, dtype, dev, 2)
    q = torch.randn(batch * extend, hq, head_dim, device=dev, dtype=dtype)
    prefix_lens = torch.full((batch,), prefix, dtype=torch.int32, device=dev)
    extend_lens = torch.full((batch,), extend, dtype=torch.int32, device=dev)
    scale = head_dim**-0.5
    elem = q.element_size()
    row.bytes_moved = 2 * q.numel() * elem + 2 * batch * total * hkv * head_dim * elem
    row.flops = 4 * head_dim * hq * batch * (extend * prefix + extend * (extend + 1) / 2)
    ours = lambda: extend_attention(  # noqa: E731
        q, k_cache, v_cache, page_table, prefix_lens, extend_lens, scale, max_extend_len=extend
    )
    out = ours()
    row.extra["ms_without_len_hint"] = ctx.timer(
        lambda: extend_attention(q, k_cache, v_cache, page_table, prefix_lens, extend_lens, scale)
    )
    # SDPA on contiguous K/V (gathered outside the timing), kv heads expanded, explicit mask.
    group = hq // hkv
    k_dense = gather_dense(torch, k_cache, page_table, total).repeat_interleave(group, 1)
    v_dense = gather_dense(torch, v_cache, page_table, total).repeat_interleave(group, 1)
    q_dense = q.view(batch, extend, hq, head_dim).transpose(1, 2).contiguous()
    mask = torch.ones(extend, total, dtype=torch.bool, device=dev).tril(diagonal=prefix)
    F = torch.nn.functional
    base = lambda: F.scaled_dot_product_attention(q_dense, k_dense, v_dense, attn_mask=mask, scale=scale)  # noqa: E731
    ref = base().transpose(1, 2).reshape(q.shape)
    row.max_abs_err = float((out.float() - ref.float()).abs().max())
    row.baseline, row.baseline_ms = "sdpa(explicit mask)", ctx.timer(base)
    try:  # the best SDPA can do for this mask: bottom-right causal, flash-capable
        from torch.nn.attention.bias import causal_lower_right

        bias = causal_lower_right(extend, total)
        best = lambda: F.scaled_dot_product_attention(q_dense, k_dense, v_dense, attn_mask=bias, scale=scale)  # noqa: E731
        row.extra["sdpa_lower_right_ms"] = ctx.timer(best)
    except Exception as exc:
        row.extra["sdpa_lower_right_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    del k_dense, v_dense
    ms = ctx.timer(ours)
    if ctx.sweep:
        from placer_kernels import extend_attention as mod

        def run(cfg):
            return lambda: mod.launch(q, k_cache, v_cache, page_table, prefix_lens, extend_lens, scale, extend, cfg)

        ctx.sweep_rows += sweep_attention(ctx, "extend-sweep", row, mod.AttentionConfig, run)
    return finish(row, ms, ctx.peak_bw, ctx.peak_flop)


ATTENTION_VARIANTS = [  # block_m, block_n, warps, stages
    (64, 64, 4, 3), (128, 64, 8, 2), (128, 64, 8, 3), (128, 64, 4, 3), (128, 128, 8, 2), (128, 128, 8, 3),
    (128, 32, 4, 3), (64, 32, 4, 4),
]


def sweep_attention(ctx, name, row, config_cls, run):
    rows = []
    for bm, bn, warps, stages in ATTENTION_VARIANTS:
        cfg = config_cls(bm, bn, warps, stages)
        r = Row(name, row.shape, row.dtype, bytes_moved=row.bytes_moved, flops=row.flops,
                extra={"config": asdict(cfg)})
        try:
            fn = run(cfg)
            fn()
            rows.append(finish(r, ctx.timer(fn), ctx.peak_bw, ctx.peak_flop))
        except Exception as exc:
            r.error = f"{type(exc).__name__}: {str(exc)[:120]}"
            rows.append(r)
    return rows


def bench_prefill(ctx, batch, tokens, hq=32, hkv=8, head_dim=128):
    torch, dev, dtype = ctx.torch, ctx.device, ctx.dtype
    from placer_kernels.prefill_attention import prefill_attention

    row = Row("prefill", f"B={batch} L={tokens} Hq={hq} Hkv={hkv} D={head_dim}", str(dtype))
    total = batch * tokens
    q = torch.randn(total, hq, head_dim, device=dev, dtype=dtype)
    k = torch.randn(total, hkv, head_dim, device=dev, dtype=dtype)
    v = torch.randn(total, hkv, head_dim, device=dev, dtype=dtype)
    cu = torch.arange(0, total + 1, tokens, dtype=torch.int32, device=dev)
    scale = head_dim**-0.5
    elem = q.element_size()
    row.bytes_moved = 2 * q.numel() * elem + 2 * k.numel() * elem
    row.flops = 4 * head_dim * hq * batch * tokens * (tokens + 1) / 2
    ours = lambda: prefill_attention(q, k, v, cu, scale, max_seq_len=tokens)  # noqa: E731
    out = ours()
    row.extra["ms_without_len_hint"] = ctx.timer(lambda: prefill_attention(q, k, v, cu, scale))

    def dense(t):
        return t.view(batch, tokens, t.shape[1], head_dim).transpose(1, 2).contiguous()

    base = sdpa(torch, dense(q), dense(k), dense(v), is_causal=True, scale=scale)
    ref = base().transpose(1, 2).reshape(q.shape)
    row.max_abs_err = float((out.float() - ref.float()).abs().max())
    row.baseline, row.baseline_ms = "sdpa(is_causal)", ctx.timer(base)
    ms = ctx.timer(ours)
    if ctx.sweep:
        from placer_kernels import prefill_attention as mod

        def run(cfg):
            return lambda: mod.launch(q, k, v, cu, scale, tokens, cfg)

        ctx.sweep_rows += sweep_attention(ctx, "prefill-sweep", row, mod.AttentionConfig, run)
    return finish(row, ms, ctx.peak_bw, ctx.peak_flop)


def bench_rms_norm(ctx, tokens, hidden):
    torch, dev, dtype = ctx.torch, ctx.device, ctx.dtype
    from placer_kernels import reference
    from placer_kernels.rmsnorm import rms_norm

    row = Row("rms_norm", f"T={tokens} H={hidden}", str(dtype))
    x = torch.randn(tokens, hidden, device=dev, dtype=dtype)
    w = torch.randn(hidden, device=dev, dtype=dtype)
    row.bytes_moved = 2 * x.numel() * x.element_size() + w.numel() * w.element_size()
    row.flops = 4 * x.numel()
    out = rms_norm(x, w, 1e-6)
    base = lambda: reference.rms_norm(x, w, 1e-6)  # noqa: E731
    row.max_abs_err = float((out.float() - base().float()).abs().max())
    row.baseline, row.baseline_ms = "torch reference", ctx.timer(base)
    return finish(row, ctx.timer(lambda: rms_norm(x, w, 1e-6)), ctx.peak_bw, ctx.peak_flop)


def bench_rope(ctx, tokens, hq=32, hkv=8, head_dim=128):
    torch, dev, dtype = ctx.torch, ctx.device, ctx.dtype
    from placer_kernels import reference
    from placer_kernels.rope import apply_rope

    row = Row("rope", f"T={tokens} Hq={hq} Hkv={hkv} D={head_dim}", str(dtype))
    q = torch.randn(tokens, hq, head_dim, device=dev, dtype=dtype)
    k = torch.randn(tokens, hkv, head_dim, device=dev, dtype=dtype)
    pos = torch.arange(tokens, device=dev)
    row.bytes_moved = 2 * (q.numel() + k.numel()) * q.element_size() + pos.numel() * 8
    row.flops = 3 * (q.numel() + k.numel())
    out = apply_rope(q, k, pos, 500000.0)
    base = lambda: reference.apply_rope(q, k, pos, 500000.0)  # noqa: E731
    row.max_abs_err = float((out[0].float() - base()[0].float()).abs().max())
    row.baseline, row.baseline_ms = "torch reference", ctx.timer(base)
    return finish(row, ctx.timer(lambda: apply_rope(q, k, pos, 500000.0)), ctx.peak_bw, ctx.peak_flop)


# --------------------------------------------------------------------------- driver


@dataclass
class Context:
    torch: object
    device: object
    dtype: object
    timer: Callable
    peak_bw: float
    peak_flop: float
    sweep: bool
    sweep_rows: list = field(default_factory=list)


def cases(on_gpu: bool, quick: bool) -> list[tuple[Callable, dict]]:
    if not on_gpu:  # interpreter: tiny shapes, just enough to run every path
        small = dict(hq=4, hkv=2, head_dim=32)
        return [
            (bench_decode, dict(batch=2, tokens=64, block_size=16, **small)),
            (bench_extend, dict(batch=2, extend=16, prefix=32, **small)),
            (bench_prefill, dict(batch=2, tokens=32, **small)),
            (bench_rms_norm, dict(tokens=8, hidden=256)),
            (bench_rope, dict(tokens=8, hq=4, hkv=2, head_dim=32)),
        ]
    decode = [dict(batch=32, tokens=8192, block_size=16), dict(batch=32, tokens=32768, block_size=64)]
    extend = [dict(batch=4, extend=512, prefix=8192)]
    prefill = [dict(batch=4, tokens=4096)]
    if not quick:
        decode += [dict(batch=64, tokens=8192, block_size=16), dict(batch=32, tokens=32768, block_size=16)]
        extend += [dict(batch=8, extend=512, prefix=16384)]
        prefill += [dict(batch=1, tokens=16384)]
    out = [(bench_decode, kw) for kw in decode] + [(bench_extend, kw) for kw in extend]
    out += [(bench_prefill, kw) for kw in prefill]
    out += [(bench_rms_norm, dict(tokens=16384, hidden=4096)), (bench_rope, dict(tokens=16384))]
    return out


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[Row], title: str) -> None:
    print(f"\n{title}")
    header = f"{'kernel':<14} {'shape':<46} {'ms':>9} {'GB/s':>8} {'%BW':>5} {'TFLOP/s':>8} {'%FLOP':>5} {'vs base':>8} {'base ms':>9}  {'max err':>8}  note"
    print(header)
    print("-" * len(header))
    for r in rows:
        note = r.error or r.baseline
        if "config" in r.extra:
            note = f"{r.extra['config']} splits={r.extra.get('num_splits', '-')} {r.error}"
        if "ms_without_len_hint" in r.extra:
            note += f"; {r.extra['ms_without_len_hint']:.3f} ms without the length hint (sync)"
        if "sdpa_lower_right_ms" in r.extra:
            note += f"; lower-right causal sdpa {r.extra['sdpa_lower_right_ms']:.3f} ms"
        print(
            f"{r.kernel:<14} {r.shape:<46} {fmt(r.ms, '9.3f')} {fmt(r.gb_per_s, '8.0f')} "
            f"{fmt(r.frac_peak_bw and 100 * r.frac_peak_bw, '5.1f')} {fmt(r.tflop_per_s, '8.1f')} "
            f"{fmt(r.frac_peak_flop and 100 * r.frac_peak_flop, '5.1f')} {fmt(r.ratio_to_baseline, '7.2f')}x "
            f"{fmt(r.baseline_ms, '9.3f')}  {fmt(r.max_abs_err, '8.1e')}  {note}"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    on_gpu = device.type == "cuda"
    if not on_gpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    import triton

    ctx = Context(
        torch=torch, device=device, dtype=torch.bfloat16, timer=make_timer(device, args.cpu_reps),
        peak_bw=args.peak_bytes_per_s, peak_flop=args.peak_flop_per_s, sweep=args.sweep and on_gpu,
    )
    name = torch.cuda.get_device_name(device) if on_gpu else "cpu (triton interpreter)"
    print(f"device: {name}; torch {torch.__version__}; triton {triton.__version__}; "
          f"peaks {args.peak_bytes_per_s:.3g} B/s, {args.peak_flop_per_s:.3g} FLOP/s")
    rows = []
    for fn, kw in cases(on_gpu, args.quick):
        try:
            rows.append(fn(ctx, **kw))
        except Exception as exc:
            rows.append(Row(fn.__name__.removeprefix("bench_"), str(kw), str(ctx.dtype),
                            error=f"{type(exc).__name__}: {str(exc)[:160]}"))
        if on_gpu:
            torch.cuda.empty_cache()
    if ctx.sweep_rows:
        ranked = sorted(ctx.sweep_rows, key=lambda r: (r.kernel, r.shape, r.ms if r.ms is not None else math.inf))
        print_table(ranked, "config sweep (fastest first per shape)")
    print_table(rows, "kernels (vs base = our time / baseline time; decode targets >= 80 %BW)")
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "device": name, "torch": torch.__version__, "triton": triton.__version__,
            "peak_bytes_per_s": args.peak_bytes_per_s, "peak_flop_per_s": args.peak_flop_per_s,
            "rows": [asdict(r) for r in rows], "sweep": [asdict(r) for r in ctx.sweep_rows],
        }
        args.json_out.write_text(json.dumps(payload, indent=2))
        print(f"\nwrote {args.json_out}")
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
