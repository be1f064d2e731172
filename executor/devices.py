"""Where the engines run: `--backend` / `--device` → a `Runtime`, and each instance's GPU claim.

In: the options `backend` (auto | triton | torch), `device` (auto | cuda | cpu) and how many
GPUs are visible (this machine's, or a Ray cluster's; None = not known here). Out: a
`Runtime` (kernel backend, torch device, dtype, whether Triton runs its interpreter) and
`place_on_devices(specs, runtime, gpus)` → the specs with `device` and `num_gpus` set.

Rules:
- device auto → cuda when a GPU is visible, else cpu; cuda with no GPU visible is refused
  (a `ValueError` naming `--device`, which the CLI turns into exit 2).
- backend auto → triton on cuda, torch on cpu; triton on cpu runs Triton's interpreter
  (`TRITON_INTERPRET=1` in the actors) — only when asked for explicitly.
- dtype: bfloat16 on cuda, float32 on cpu.
- GPU claims: an instance claims its plan's `tp` GPUs when the visible GPUs hold every
  instance's; otherwise (a scaled-down emulation on fewer GPUs, e.g. a whole plan on one
  H200) the instances share them evenly — `gpus / instances` each, a whole number when
  that is >= 1 (Ray takes fractions only below one).
- A fleet (specs of several models) never puts two models on one device: when every instance
  gets its `tp` GPUs Ray gives each actor its own; when they must share (too few GPUs), the
  visible GPUs are split between the models first (`split_gpus`: one each at least, the rest to
  the model with the most instances per GPU; fewer GPUs than models is refused) and each
  instance is pinned to GPUs of its own model (`gpu_ids`, indices on the node the emulation runs
  on), sharing them only with that model's instances.
No torch at import: `visible_gpus` imports it when called.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

BACKEND_CHOICES = ("auto", "triton", "torch")
DEVICE_CHOICES = ("auto", "cuda", "cpu")
DTYPE_ON = {"cuda": "bfloat16", "cpu": "float32"}


@dataclass(frozen=True)
class Runtime:
    """How every engine of a deployment runs."""

    backend: str = "torch"  # "torch" | "triton"
    device: str = "cpu"  # "cpu" | "cuda" | "auto" (only when the GPUs are not known here: decided on the cluster)
    dtype: str = "float32"
    interpret: bool = False  # Triton's interpreter on the CPU

    def describe(self) -> str:
        if self.device == "auto":
            return f"backend {self.backend}, device decided on the cluster (cuda if it has GPUs, else cpu)"
        mode = " (Triton interpreter)" if self.interpret else ""
        return f"backend {self.backend}{mode} on {self.device}, {self.dtype}"


def visible_gpus() -> int:
    """CUDA devices torch sees on this machine (0 without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_runtime(backend: str = "auto", device: str = "auto", gpus: int | None = 0) -> Runtime:
    """The runtime for the options, given `gpus` visible (None: not known here, e.g. a remote cluster)."""
    if backend not in BACKEND_CHOICES:
        raise ValueError(f"--backend must be one of {', '.join(BACKEND_CHOICES)}, got {backend!r}")
    if device not in DEVICE_CHOICES:
        raise ValueError(f"--device must be one of {', '.join(DEVICE_CHOICES)}, got {device!r}")
    if device == "auto":
        if gpus is None:
            return Runtime(backend=backend, device="auto", dtype="auto")
        device = "cuda" if gpus > 0 else "cpu"
    if device == "cuda" and gpus == 0:
        raise ValueError("--device cuda: no GPU is visible on this machine (torch.cuda.device_count() is 0); "
                         "use --device cpu, or --address to deploy on a Ray cluster with GPUs")
    if backend == "auto":
        backend = "triton" if device == "cuda" else "torch"
    return Runtime(backend=backend, device=device, dtype=DTYPE_ON[device],
                   interpret=backend == "triton" and device == "cpu")


def gpu_share(specs: list[Any], gpus: float) -> float | None:
    """GPUs each instance claims when they do not all get their `tp` (None: each claims its tp)."""
    if not specs or sum(s.tp for s in specs) <= gpus:
        return None
    share = gpus / len(specs)
    return float(math.floor(share)) if share >= 1 else math.floor(share * 1e4) / 1e4


def split_gpus(instances: dict[str, list[Any]], gpus: int) -> dict[str, tuple[int, ...]]:
    """Each model's own GPU indices: one each, then one at a time to the model with the most
    instances per GPU (ties: the first listed) while it claims fewer than its instances' `tp`."""
    if gpus < len(instances):
        raise ValueError(f"{len(instances)} models cannot each have GPUs of their own on {gpus:g} GPUs (the "
                         f"models of a fleet never share a device); deploy on at least {len(instances)} GPUs")
    count = dict.fromkeys(instances, 1)
    for _ in range(gpus - len(instances)):
        hungry = [m for m, specs in instances.items() if count[m] < sum(s.tp for s in specs)]
        if not hungry:
            break
        best = max(hungry, key=lambda m: len(instances[m]) / count[m])
        count[best] += 1
    out, start = {}, 0
    for model, n in count.items():
        out[model], start = tuple(range(start, start + n)), start + n
    return out


def _pin(specs: list[Any], ids: tuple[int, ...]) -> list[Any]:
    """One model's instances on its own GPUs `ids`: whole GPUs each when there are enough (at most
    its tp), else each pinned to one of them in turn, sharing it evenly."""
    n, g = len(specs), len(ids)
    if g >= n:
        per = g // n
        return [dataclasses.replace(s, device="cuda", num_gpus=float(min(per, s.tp)),
                                    gpu_ids=ids[k * per:k * per + min(per, s.tp)]) for k, s in enumerate(specs)]
    share = math.floor(g / n * 1e4) / 1e4
    return [dataclasses.replace(s, device="cuda", num_gpus=share, gpu_ids=(ids[k % g],)) for k, s in enumerate(specs)]


def place_on_devices(specs: list[Any], runtime: Runtime, gpus: float | None) -> list[Any]:
    """`specs` with their device and GPU claim (`num_gpus`) for `runtime` over `gpus` visible GPUs
    (a fleet's models on GPUs apart: see the module docstring)."""
    if runtime.device != "cuda":
        return [dataclasses.replace(s, device=runtime.device, num_gpus=0.0) for s in specs]
    share = gpu_share(specs, gpus) if gpus is not None else None
    by_model: dict[str, list[Any]] = {}
    for s in specs:
        by_model.setdefault(getattr(s, "model", None), []).append(s)
    if share is not None and len(by_model) > 1:
        ids = split_gpus(by_model, int(gpus))
        pinned = {s.name: s for model, group in by_model.items() for s in _pin(group, ids[model])}
        return [pinned[s.name] for s in specs]
    if share == 0:
        raise ValueError(f"{len(specs)} instances cannot share {gpus:g} GPUs; lower --max-per-pool")
    return [dataclasses.replace(s, device="cuda", num_gpus=float(s.tp) if share is None else share) for s in specs]
