"""Run a whole chip profile: the library function behind ``placer profile chip``.

in:  a device ("cpu", "cuda", "cuda:1"), an optional catalog chip name, quick or full
out: a plain dict in the :class:`placer.profiles.records.ChipProfile` schema: provenance,
     every measurement with its samples, the best figure per dimension and
     efficiency = measured / roofline per dimension.

Only torch, triton and the standard library are needed (no pydantic), so the same
code runs on a GPU machine that lacks the project's dependencies:

    python3 -m profiler.run --device cuda:0 --out profile.json [--quick]

``--out`` is written even when a figure beats its roofline; the run then exits 3
and names the figure (``strict`` in :func:`profile_chip` raises instead).
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from placer.errors import InputError
from placer.profiles import SCHEMA_VERSION, Measurement, RooflineExceededError, Rooflines, check_roofline
from profiler import compute, interconnect, memory
from profiler.rooflines import chip_for_device_name, cpu_model_name, for_cpu, from_chip

StepCallback = Callable[[str, int, int], None]  # (step label, steps done, steps in all)


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError, IndexError):
        return ""


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=os.path.dirname(os.path.abspath(__file__)))
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def provenance(torch, device, device_model: str) -> dict:
    """Who measured, where, when, with what software."""
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = ""
    gpu = device.type == "cuda"
    host = socket.gethostname()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return {
        "host": host,
        "measured_by": f"{user}@{host}",
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": str(device),
        "device_model": device_model,
        "driver": (_driver_version() or f"cuda {torch.version.cuda}") if gpu else f"linux {platform.release()}",
        "cuda_runtime": torch.version.cuda if gpu else None,
        "torch_version": torch.__version__,
        "triton_version": triton_version,
        "python_version": platform.python_version(),
        "profiler_commit": _git_commit(),
        "command": " ".join(sys.argv) if sys.argv and sys.argv[0] else "",
    }


def resolve_rooflines(torch, device, chip: str | None) -> tuple[str, Rooflines, str]:
    """The chip the figures calibrate, the rooflines to check against and the device's model name."""
    if device.type == "cuda":
        model = torch.cuda.get_device_name(device)
        name = chip or chip_for_device_name(model)
        if name is None:
            raise InputError(f"--chip: device {model!r} is not in the catalog; name the catalog chip whose "
                             "datasheet bounds it (placer catalog lists them)")
        return name, from_chip(name, model), model
    model = cpu_model_name()
    return (chip, from_chip(chip), model) if chip else ("cpu", for_cpu(), model)


def summarize_profile(measurements: list[Measurement], roof: Rooflines) -> tuple[dict, dict]:
    """Best figure per dimension and efficiency = measured / roofline (None where unmeasured)."""
    by_dtype = compute.best_by_dtype(measurements)

    def best(dimension: str, prefix: str = "") -> float | None:
        values = [m.median for m in measurements if m.dimension == dimension and m.name.startswith(prefix)]
        return max(values) if values else None

    summary = {
        "compute_flop_per_s": by_dtype,
        "mem_bw_bytes_per_s": best("memory_bandwidth"),
        "mem_capacity_bytes": best("memory_capacity"),
        "host_to_device_bytes_per_s": best("interconnect", "h2d"),
        "device_to_host_bytes_per_s": best("interconnect", "d2h"),
        "device_to_device_bytes_per_s": best("interconnect", "d2d"),
        "allreduce_bus_bytes_per_s": best("interconnect", "all-reduce"),
        "loopback_bytes_per_s": best("interconnect", "loopback"),
    }

    def ratio(value, bound):
        return value / bound if value is not None and bound else None

    compute_ratio = {d: ratio(v, roof.flop_per_s.get(d)) for d, v in by_dtype.items()}
    capacity = next((m for m in measurements if m.dimension == "memory_capacity"), None)
    efficiency = {
        "compute_efficiency": compute_ratio.get("bf16"),
        "mem_bw_efficiency": ratio(summary["mem_bw_bytes_per_s"], roof.mem_bw_bytes_per_s),
        "interconnect_efficiency": ratio(summary["allreduce_bus_bytes_per_s"], roof.scaleup_bytes_per_s),
        "mem_capacity_fraction": None if capacity is None or capacity.params.get("capped")
        else ratio(capacity.median, roof.mem_capacity_bytes),
        "compute_by_dtype": {d: r for d, r in compute_ratio.items() if r is not None},
    }
    return summary, efficiency


def profile_chip(device: str = "cpu", chip: str | None = None, quick: bool = False, reps: int | None = None,
                 on_step: StepCallback | None = None, strict: bool = True) -> dict:
    """Measure the device on the four dimensions; a dict in the ChipProfile schema.

    ``strict``: raise :class:`RooflineExceededError` at the first figure above its
    roofline; else list such figures under ``roofline_violations`` (the record
    refuses to load them either way).
    """
    import torch

    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise InputError(f"--device: {device!r} is not supported; use cpu, cuda or cuda:N")
    dev = torch.device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"--device: {device!r} asked for, but torch sees no CUDA device")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(dev)
    chip, roof, model = resolve_rooflines(torch, dev, chip)
    reps = reps or (5 if quick else 10)
    steps = [
        ("compute (matmul per dtype)", lambda: compute.measure(torch, dev, roof, quick, reps)),
        ("memory bandwidth (copy, triad)", lambda: memory.measure_bandwidth(torch, dev, roof, quick, reps)),
        ("memory capacity", lambda: memory.measure_capacity(torch, dev, roof, quick)),
        ("interconnect", lambda: interconnect.measure(torch, dev, roof, quick, reps)),
    ]
    measurements: list[Measurement] = []
    skipped: list[str] = []
    violations: list[str] = []
    started = time.perf_counter()
    for i, (label, step) in enumerate(steps):
        if on_step:
            on_step(label, i, len(steps))
        got, why = step()
        for m in got:
            try:
                check_roofline(m)
            except RooflineExceededError as err:
                if strict:
                    raise
                violations.append(str(err))
        measurements += got
        skipped += why
    if on_step:
        on_step("done", len(steps), len(steps))
    summary, efficiency = summarize_profile(measurements, roof)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "chip",
        "chip": chip,
        "quick": quick,
        "provenance": provenance(torch, dev, model),
        "rooflines": roof.as_dict(),
        "measurements": [m.as_dict() for m in measurements],
        "summary": summary,
        "efficiency": efficiency,
        "skipped": skipped,
        "roofline_violations": violations,
        "duration_s": time.perf_counter() - started,
    }


def _print_step(label: str, done: int, total: int) -> None:
    print(f"[{done}/{total}] {label}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Profile one chip; writes the ChipProfile JSON (no pydantic needed).")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--chip", default=None, help="catalog chip whose datasheet bounds the figures")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=None, help="write the profile JSON here")
    args = parser.parse_args(argv)
    profile = profile_chip(args.device, args.chip, args.quick, on_step=_print_step, strict=False)
    text = json.dumps(profile, indent=2)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    for m in profile["measurements"]:
        frac = f"{m['median'] / m['roofline']:6.1%}" if m["roofline"] else "   -  "
        print(f"{m['dimension']:<17} {m['name']:<34} median {m['median']:.4g} {m['unit']:<11} "
              f"spread {m['spread_rel']:5.1%}  of roofline {frac}")
    print("efficiency:", json.dumps(profile["efficiency"]))
    for line in profile["skipped"]:
        print("skipped:", line)
    for line in profile["roofline_violations"]:
        print("ROOFLINE VIOLATION:", line)
    return 3 if profile["roofline_violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
