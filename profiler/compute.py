"""Peak compute: dense matmul FLOP/s per dtype, several shapes, best sustained.

in:  torch, a device, its :class:`~placer.profiles.Rooflines`, quick or full
out: one :class:`~placer.profiles.Measurement` per (dtype, shape), samples in FLOP/s
     (2·M·N·K per product), and the list of what was skipped and why.

Operands are random normal (zeros run faster on some chips and would flatter the
figure). Each timed repetition runs enough products back to back to last
``TARGET_S`` (sustained, not one burst); a shape's figure is its median, a dtype's
"best sustained" is the best shape's median (:func:`best_by_dtype`). fp32 runs with
TF32 off (torch's default): the true fp32 rate. fp8 (e4m3 × e4m3 → bf16 through
``torch._scaled_mm``) runs only on CUDA devices of compute capability 8.9 or newer.
"""

from __future__ import annotations

from placer.profiles import Measurement, Rooflines
from profiler.measure import measurement
from profiler.rooflines import native_fp16_matmul
from profiler.timing import auto_inner, is_cuda, rates, time_runs

TARGET_S = 0.02
GPU_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 4096)]
GPU_SHAPES_QUICK = [(4096, 4096, 4096), (8192, 8192, 8192)]
CPU_SHAPES = [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048)]
CPU_SHAPES_QUICK = [(256, 256, 256), (512, 512, 512)]
CPU_SLOW_FP16_SHAPES = [(128, 128, 128)]  # no native fp16: torch's fallback is ~1 GFLOP/s


def _matmul(torch, dtype_name, m, n, k, device):
    gen = torch.Generator(device=device).manual_seed(0)
    if dtype_name == "fp8":
        a = torch.randn(m, k, device=device, generator=gen).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device, generator=gen).to(torch.float8_e4m3fn).t()  # column-major
        one = torch.ones((), device=device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    a = torch.randn(m, k, device=device, generator=gen, dtype=dtype)
    b = torch.randn(k, n, device=device, generator=gen, dtype=dtype)
    out = torch.empty(m, n, device=device, dtype=dtype)
    return lambda: torch.matmul(a, b, out=out)


def dtypes_for(torch, device) -> tuple[list[str], list[str]]:
    """The dtypes this device can run, and a reason for each one it cannot."""
    names, skipped = ["fp32", "bf16", "fp16"], []
    if is_cuda(device):
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) >= (8, 9) and hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm"):
            names.append("fp8")
        else:
            skipped.append(f"compute fp8: needs compute capability >= 8.9 (have {major}.{minor})")
    else:
        skipped.append("compute fp8: no fp8 matmul on the CPU")
    return names, skipped


def measure(torch, device, roof: Rooflines, quick: bool = False, reps: int = 5) -> tuple[list[Measurement], list[str]]:
    """Matmul FLOP/s for every supported dtype and shape."""
    dtypes, skipped = dtypes_for(torch, device)
    gpu = is_cuda(device)
    out = []
    for dtype in dtypes:
        if gpu:
            shapes = GPU_SHAPES_QUICK if quick else GPU_SHAPES
        elif dtype == "fp16" and not native_fp16_matmul():
            shapes = CPU_SLOW_FP16_SHAPES
            skipped.append("compute fp16: this CPU has no native fp16 matmul; measured on a tiny shape only")
        else:
            shapes = CPU_SHAPES_QUICK if quick else CPU_SHAPES
        for m, n, k in shapes:
            try:
                fn = _matmul(torch, dtype, m, n, k, device)
                inner = auto_inner(fn, device, TARGET_S)
                seconds = time_runs(fn, device, warmup=1, reps=reps, inner=inner)
            except (RuntimeError, TypeError, NotImplementedError) as exc:
                skipped.append(f"compute {dtype} {m}x{n}x{k}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            finally:
                fn = None
                if gpu:
                    torch.cuda.empty_cache()
            out.append(measurement(
                dimension="compute", name=f"matmul {dtype} {m}x{n}x{k}", unit="flop_per_s",
                samples=rates(2.0 * m * n * k, seconds), roofline=roof.flop_per_s.get(dtype),
                roofline_source=f"{roof.source}: {dtype} peak",
                params={"dtype": dtype, "m": m, "n": n, "k": k, "inner": inner, "reps": reps},
            ))
    return out, skipped


def best_by_dtype(measurements: list[Measurement]) -> dict[str, float]:
    """Best sustained FLOP/s per dtype: the highest per-shape median."""
    best: dict[str, float] = {}
    for m in measurements:
        if m.dimension == "compute":
            dtype = m.params["dtype"]
            best[dtype] = max(best.get(dtype, 0.0), m.median)
    return best
