"""Rooflines: what a device cannot beat on each dimension.

in:  a catalog chip name (datasheet peaks from :mod:`placer.catalog`), or a CPU
out: :class:`placer.profiles.Rooflines` with FLOP/s per dtype, memory bytes/s, capacity bytes, the
     host link and the scale-up link (one direction), each with its source.

For a catalog chip the figures are the datasheet's: bf16 and fp16 dense peak; fp8
dense peak where the chip has fp8 tensor cores; fp32 bounded by the TF32 dense peak
(half of bf16 on every catalog chip), an upper bound for true fp32; capacity is
``mem_gb`` read as GiB (HBM stacks are sized in GiB: an H200 shows 143771 MiB,
more than 141e9 bytes); the host link is PCIe 5.0 x16 (64 GB/s a direction) unless
the device is a Grace superchip. For a CPU no datasheet is at hand, so the bounds
are generous *estimates* from /proc/cpuinfo (logical cores × at least 5 GHz × the
widest SIMD / AMX rate its flags allow; 12 DDR5-6400 channels per socket) — good
enough to catch a benchmark bug, not to compare chips.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from placer.catalog import Chip, get_chip
from placer.profiles import Rooflines

GIB = 1 << 30
PCIE5_X16_BYTES_PER_S = 64e9  # 32 GT/s × 16 lanes / 8, before encoding: a hard bound per direction
NVLINK_C2C_BYTES_PER_S = 450e9  # Grace-Hopper chip-to-chip, one direction
CPU_MIN_GHZ_BOUND = 5.0
DDR5_SOCKET_BYTES_PER_S = 12 * 8 * 6.4e9  # 12 channels × 8 B × 6400 MT/s

#: Substrings of ``torch.cuda.get_device_name`` → catalog chip, first match wins.
DEVICE_NAME_TO_CHIP = (
    ("GH200", "H200-SXM"), ("H200", "H200-SXM"), ("H800", "H800-SXM"), ("H100", "H100-SXM"), ("H20", "H20"),
    ("A800", "A800-80G-SXM"), ("A100", "A100-80G-SXM"), ("L40S", "L40S"), ("L20", "L20"),
    ("GB200", "GB200"), ("B200", "B200"), ("MI325X", "MI325X"), ("MI300X", "MI300X"),
)


def chip_for_device_name(device_name: str) -> str | None:
    """The catalog chip a CUDA device name denotes, or None when unknown."""
    upper = device_name.upper()
    for key, chip in DEVICE_NAME_TO_CHIP:
        if key in upper:
            return chip
    return None


def from_chip(chip: Chip | str, device_name: str = "") -> Rooflines:
    """Datasheet rooflines of a catalog chip (``device_name`` picks the host link)."""
    chip = get_chip(chip) if isinstance(chip, str) else chip
    flops = {"bf16": chip.peak_flops_per_s("bf16"), "fp16": chip.peak_flops_per_s("bf16"),
             "fp32": chip.peak_flops_per_s("bf16") / 2}
    if chip.fp8_tflops:
        flops["fp8"] = chip.fp8_tflops * 1e12
    superchip = any(k in device_name.upper() for k in ("GH200", "GB200"))
    host = NVLINK_C2C_BYTES_PER_S if superchip else PCIE5_X16_BYTES_PER_S
    return Rooflines(
        source=f"datasheet {chip.name} (placer catalog, confidence {chip.confidence})",
        datasheet=True,
        flop_per_s=flops,
        mem_bw_bytes_per_s=chip.mem_bw_tbps * 1e12,
        mem_capacity_bytes=chip.mem_gb * GIB,
        host_link_bytes_per_s=host,
        scaleup_bytes_per_s=chip.scaleup_gbps_bidir * 1e9 / 2,
        notes=("fp32 bounded by the TF32 dense peak (bf16 / 2)", "capacity: mem_gb read as GiB",
               "host link: PCIe 5.0 x16 unless a Grace superchip"),
    )


def _cpuinfo() -> tuple[set[str], float, int, str]:
    flags: set[str] = set()
    mhz, sockets, model = 0.0, set(), ""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "cpu MHz":
            mhz = max(mhz, float(value or 0))
        elif key == "physical id":
            sockets.add(value)
        elif key in ("model name", "Model") and not model:
            model = value
    try:
        mhz = max(mhz, int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1e3)
    except (OSError, ValueError):
        pass
    return flags, mhz, max(1, len(sockets)), model


def cpu_model_name() -> str:
    return _cpuinfo()[3] or os.uname().machine


def _mem_total_bytes() -> float | None:
    try:
        m = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
    except OSError:
        return None
    return float(m.group(1)) * 1024 if m else None


def for_cpu() -> Rooflines:
    """Generous estimated rooflines of this machine's CPU."""
    flags, mhz, sockets, model = _cpuinfo()
    ghz = max(mhz / 1e3, CPU_MIN_GHZ_BOUND)
    cores = os.cpu_count() or 1
    if "avx512f" in flags:
        fp32 = 64  # 2 FMA units × 16 lanes × 2
    elif "avx2" in flags or "fma" in flags:
        fp32 = 32
    elif "asimd" in flags or "sve" in flags:
        fp32 = 64  # generous for Arm (2-4 × 128-bit FMA pipes, or SVE)
    else:
        fp32 = 16
    bf16 = 1024 if "amx_bf16" in flags else 128 if "avx512_bf16" in flags or "bf16" in flags else fp32
    fp16 = 1024 if "amx_fp16" in flags else 128 if "avx512_fp16" in flags or "fphp" in flags else fp32
    core_hz = cores * ghz * 1e9
    return Rooflines(
        source=f"estimate for {model or 'this CPU'}: {cores} logical cores × {ghz:.1f} GHz × SIMD FLOP/cycle; "
               f"{sockets} socket(s) × 12 DDR5-6400 channels",
        datasheet=False,
        flop_per_s={"fp32": fp32 * core_hz, "bf16": bf16 * core_hz, "fp16": fp16 * core_hz},
        mem_bw_bytes_per_s=sockets * DDR5_SOCKET_BYTES_PER_S,
        mem_capacity_bytes=_mem_total_bytes(),
        host_link_bytes_per_s=None,
        scaleup_bytes_per_s=None,
        notes=("CPU bounds are upper-bound estimates, not a datasheet",),
    )


def native_fp16_matmul(flags: set[str] | None = None) -> bool:
    """Whether this CPU multiplies fp16 natively (else torch's fp16 matmul is very slow)."""
    flags = _cpuinfo()[0] if flags is None else flags
    return bool({"avx512_fp16", "amx_fp16", "fphp", "asimdhp"} & flags)
