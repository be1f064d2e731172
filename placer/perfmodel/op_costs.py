"""Seconds of one operator on one rank, from an engine's measured kernels where they cover the shape,
transferred from the nearest measured chip where the chip itself is not covered, else the roofline.

in:  a chip, the engine's per-op tables (:class:`placer.kernels.tables.OpTables`, the chip's own or a
     reference chip's), an op family and its table arguments, the op's FLOPs and bytes, and the
     roofline seconds the caller would use without tables
out: :meth:`OpCosts.seconds` → (seconds, whether a table answered); :attr:`OpCosts.label`

Transfer (issue 41, part 4). A table measured on chip R answers a shape S in t_R(S). S's roofline on
R is max(FLOPs / peak_R, bytes / HBM_R); the larger side is the resource that bound the kernel
(:func:`transfer_s`):

* memory bound on R: the kernel's HBM efficiency bytes / (HBM_R · t_R) holds on C's HBM, and its
  FLOPs run at C's own (catalog) compute efficiency — the measurement never exercised R's tensor
  cores, so a latency-bound kernel's slowness is not also charged C's compute gap (decode GEMMs on
  H20, whose ridge point is 5.6x lower than H200's, cross from memory- to compute-bound);
* compute bound on R: the tensor cores' share of t_R, FLOPs / (peak_R · catalog efficiency) (all of
  t_R where the kernel beats that), scales with the tensor peaks; the rest of t_R is work off the
  tensor cores (block-scale promotion on CUDA cores, epilogues, latency) and scales with the memory
  system, HBM_R / HBM_C. On H20 (tensor peak 6.7x below H200's, HBM 1.2x) the H200 block-FP8
  grouped GEMMs that run at 18 % of peak are then not charged 6.7x for their non-tensor time;
* collectives scale with C's scale-up link (α + 2(n−1)/n · bytes / link, α unscaled).

A shape bound by the same resource on both chips and run at the catalog's efficiency thus scales by
that resource's peaks. The shape's curve (tile padding, wave quantisation, launch latency) is R's.

Outside what was measured (a table answers None) the op takes the caller's roofline term, and the
answer says so (``measured`` False). Answers are memoised: the planner asks the same shapes over and
over (a max-batch bisection asks ~10 steps of ~10 ops each per instance and class).
"""

from __future__ import annotations

from typing import Any

from placer.catalog import Chip

#: op families and the tables' method answering each (placer.kernels.tables.OpTables)
FAMILIES = {
    "gemm": "gemm_s", "context_attention": "context_attention_s", "generation_attention": "generation_attention_s",
    "context_mla": "context_mla_s", "generation_mla": "generation_mla_s", "moe": "moe_s",
    "allreduce": "allreduce_s", "alltoall": "alltoall_s",
}
#: families that are collectives: their roofline is a link, not tensor cores and HBM
COLLECTIVES = frozenset({"allreduce", "alltoall"})
#: fixed latency of one collective in the transfer ratio (NCCL ring-LL base + launch, as
#: :mod:`placer.perfmodel.constants`): the same on both chips, so small messages do not scale
COLLECTIVE_ALPHA_S = 8.6e-6
#: memo entries kept per OpCosts (each a few hundred bytes)
MEMO_ENTRIES = 200_000


def peak_roofline_s(chip: Chip, flops: float, mem_bytes: float, dtype: str, collective_gpus: int = 0) -> float:
    """Datasheet roofline seconds of one op on ``chip`` (no efficiencies: the transfer's yardstick)."""
    if collective_gpus:
        n = max(collective_gpus, 2)
        return COLLECTIVE_ALPHA_S + 2 * (n - 1) / n * mem_bytes / (chip.scaleup_gbps_bidir * 1e9 / 2)
    rate = chip.peak_flops_per_s(dtype) if chip.has_rate(dtype) else chip.peak_flops_per_s("bf16")
    return max(flops / rate, mem_bytes / (chip.mem_bw_tbps * 1e12))


def _sides(chip: Chip, flops: float, mem_bytes: float, dtype: str) -> tuple[float, float]:
    """(compute s, memory s) of one op at ``chip``'s datasheet peaks."""
    rate = chip.peak_flops_per_s(dtype) if chip.has_rate(dtype) else chip.peak_flops_per_s("bf16")
    return flops / rate, mem_bytes / (chip.mem_bw_tbps * 1e12)


def transfer_s(seconds: float, ref: Chip, chip: Chip, flops: float, mem_bytes: float, dtype: str,
               collective_gpus: int = 0) -> float | None:
    """The seconds ``ref`` measured for one op, carried to ``chip`` (the module docstring's rule: the
    side that bound the kernel on ``ref`` keeps what was measured of it, the other side runs at
    ``chip``'s own catalog efficiency)."""
    if collective_gpus:
        ref_s = peak_roofline_s(ref, flops, mem_bytes, dtype, collective_gpus)
        own_s = peak_roofline_s(chip, flops, mem_bytes, dtype, collective_gpus)
        return seconds * own_s / ref_s if ref_s > 0 else None
    c_ref, m_ref = _sides(ref, flops, mem_bytes, dtype)
    c_own, m_own = _sides(chip, flops, mem_bytes, dtype)
    if max(c_ref, m_ref) <= 0:
        return None
    if c_ref >= m_ref:  # compute bound where measured: the tensor cores' share at the catalog's
        # efficiency scales with the tensor peak, the rest of the time (scale promotion, epilogues,
        # latency: work off the tensor cores) with the memory system
        tensor_ref = min(seconds, c_ref / ref.compute_efficiency)
        rest = seconds - tensor_ref
        return max(tensor_ref * c_own / c_ref + rest * ref.mem_bw_tbps / chip.mem_bw_tbps,
                   m_own / chip.mem_bw_efficiency)
    else:
        e_compute, e_memory = chip.compute_efficiency, min(1.0, m_ref / seconds)
    return max(c_own / e_compute, m_own / e_memory)


class OpCosts:
    """One chip's op costs under one engine: ``tables`` measured on ``table_chip`` (the chip itself when
    covered, the reference chip when transferred)."""

    def __init__(self, chip: Chip, tables: Any, table_chip: Chip, label: str) -> None:
        self.chip = chip
        self.tables = tables
        self.table_chip = table_chip
        self.transferred = table_chip.name != chip.name
        #: e.g. "measured kernels (vllm 0.24.0, h200_sxm)" or "transferred from h100_sxm vllm 0.24.0"
        self.label = label
        self._memo: dict[tuple, float | None] = {}

    def measured_s(self, family: str, args: tuple, flops: float = 0.0, mem_bytes: float = 0.0,
                   dtype: str = "bf16", collective_gpus: int = 0) -> float | None:
        """The table's seconds for ``family(*args)`` on this chip (transferred when the table is another
        chip's), None outside what was measured."""
        key = (family, args, flops, mem_bytes, dtype, collective_gpus)
        memo = self._memo
        if key in memo:
            return memo[key]
        seconds = getattr(self.tables, FAMILIES[family])(*args)
        if seconds is not None and not seconds > 0:
            seconds = None
        if seconds is not None and self.transferred:
            seconds = transfer_s(seconds, self.table_chip, self.chip, flops, mem_bytes, dtype, collective_gpus)
        if len(memo) < MEMO_ENTRIES:
            memo[key] = seconds
        return seconds

    def seconds(self, family: str, args: tuple, roofline_s: float, flops: float = 0.0, mem_bytes: float = 0.0,
                dtype: str = "bf16", collective_gpus: int = 0) -> tuple[float, bool]:
        """(seconds, measured): the table's answer (:meth:`measured_s`), else ``roofline_s``."""
        seconds = self.measured_s(family, args, flops, mem_bytes, dtype, collective_gpus)
        return (roofline_s, False) if seconds is None else (seconds, True)
