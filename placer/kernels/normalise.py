"""One database row → one placer record, and the datasheet floor no measurement may beat.

in:  a raw row of AIConfigurator's database (a dict, from parquet or the test CSVs), its family
out: :func:`normalise` → :class:`Record` (exact-match key, interpolation axes, seconds, the kernel
     that produced it) or the reason the row is not kept; :func:`floor_s` → the fewest seconds
     the chip's datasheet allows for that record (peak FLOP/s, HBM bytes/s, scale-up bytes/s).

Units: the database's latencies are milliseconds, except the MoE all-to-all rows (``transmit_us``:
microseconds); collective message sizes are elements (NCCL's 'half' rows take ~1.5–2x the 'int8'
rows at the same size), turned into bytes here. Dtypes get placer's names ('bf16', 'fp8',
'fp8_block', 'fp4').
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.catalog import Chip
from placer.kernels.tables import DEFAULT_DISTRIBUTION

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "half", "fp8": "fp8", "fp8_block": "fp8_block",
          "nvfp4": "fp4", "int8": "int8"}
#: bytes of one weight value per GEMM dtype (lower bounds for the HBM floor)
WEIGHT_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp8_block": 1, "fp4": 0.5, "int8_wo": 1, "int4_wo": 0.5,
                "sq": 1, "w4a16": 0.5, "w4a8": 0.5}
#: the tensor-core rate each GEMM dtype runs at (weight-only dtypes compute in bf16)
COMPUTE = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4",
           "int8_wo": "bf16", "int4_wo": "bf16", "w4a16": "bf16", "sq": "int8"}
KV_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp4": 0.5}
MLA_KV_VALUES = 512 + 64  # compressed KV (kv_lora_rank) + decoupled RoPE key per token (DeepSeek-V2/V3)
MLA_QK_DIM, MLA_V_DIM = 192, 128  # MLA prefill: query/key head dim (128 + 64 RoPE) and value head dim


@dataclass(frozen=True)
class Record:
    key: tuple
    axes: tuple[float, ...]
    seconds: float
    kernel: str


def _dtype(value) -> str:
    text = str(value).strip().lower()
    return DTYPES.get(text, text)


def _i(row: dict, name: str) -> int:
    try:
        return int(float(row[name]))
    except KeyError:
        raise ValueError(f"a database row lacks the column {name!r} (columns: {', '.join(row)})") from None


def normalise(family: str, row: dict) -> Record | str:
    """The record of ``row``, or a short reason it is skipped (another variant than placer models)."""
    ms = float(row["latency"])
    if not ms > 0:
        return "latency not positive"
    s = ms * 1e-3
    kernel = str(row.get("kernel_source", ""))
    if family == "gemm":
        return Record((_dtype(row["gemm_dtype"]),), (_i(row, "n"), _i(row, "k"), _i(row, "m")), s, kernel)
    if family in ("context_attention", "generation_attention"):
        if int(row.get("window_size") or 0) != 0:
            return "sliding-window attention"
        if int(row.get("beam_width") or 1) != 1:
            return "beam search"
        if _dtype(row.get("attn_dtype", "bfloat16")) != "bf16":
            return "fp8 attention math (engines default to bf16)"
        key = (_dtype(row["kv_cache_dtype"]), _i(row, "head_dim"))
        if family == "context_attention":
            if _i(row, "step"):
                return "context attention after a prefix"
            axes = (_i(row, "num_heads"), _i(row, "num_key_value_heads"), _i(row, "batch_size"), _i(row, "isl"))
        else:  # one decode step of a sequence holding isl + step tokens (isl is 1; steps are 2^j - 1)
            context = _i(row, "isl") + _i(row, "step")
            axes = (_i(row, "num_heads"), _i(row, "num_key_value_heads"), _i(row, "batch_size"), context)
        return Record(key, axes, s, kernel)
    if family in ("context_mla", "generation_mla"):
        if _dtype(row.get("mla_dtype", "bfloat16")) != "bf16":
            return "fp8 MLA math (engines default to bf16)"
        length = _i(row, "isl") if family == "context_mla" else _i(row, "isl") + _i(row, "step")
        if family == "context_mla" and _i(row, "step"):
            return "context attention after a prefix"
        return Record((_dtype(row["kv_cache_dtype"]),), (_i(row, "num_heads"), _i(row, "batch_size"), length),
                      s, kernel)
    if family == "moe":
        if str(row["distribution"]) != DEFAULT_DISTRIBUTION:
            return f"routing other than {DEFAULT_DISTRIBUTION} (the tables' one routing)"
        key = (_dtype(row["moe_dtype"]), str(row["distribution"]), _i(row, "hidden_size"), _i(row, "inter_size"),
               _i(row, "topk"), _i(row, "num_experts"), _i(row, "moe_tp_size"), _i(row, "moe_ep_size"))
        return Record(key, (_i(row, "num_tokens"),), s, kernel)
    if family == "allreduce":
        dtype = _dtype(row["allreduce_dtype"])
        variant = row.get("implementation") or row.get("backend") or ""
        return Record((dtype, _i(row, "num_gpus")), (_i(row, "message_size") * KV_BYTES.get(dtype, 2),), s,
                      f"{kernel}/{variant}" if variant else kernel)
    if family == "nccl":
        dtype = _dtype(row["nccl_dtype"])
        size = _i(row, "message_size") * (1 if dtype == "int8" else 2)
        return Record((str(row["op_name"]), dtype, _i(row, "num_gpus")), (size,), s, kernel)
    if family == "moe_a2a":
        if _i(row, "node_num") != 1:
            return "more than one node"
        key = (str(row["comm_backend"]), str(row["phase"]), _dtype(row["comm_dtype"]), _i(row, "ep_size"),
               _i(row, "hidden_size"), _i(row, "topk"), _i(row, "num_experts"))
        return Record(key, (_i(row, "num_tokens"),), ms * 1e-6,  # these rows' latency is microseconds
                      f"{kernel}/sms={row.get('sms', '')}")
    raise ValueError(f"unknown op family {family!r}")


def floor_s(family: str, record: Record, chip: Chip | None) -> tuple[float, str] | None:
    """(the fewest seconds the datasheet allows, what binds: 'compute' or 'HBM' or 'scale-up'), or
    None where no firm floor is known (MoE: the measured rank's share of tokens is not in the row;
    the all-to-all's bytes depend on routing)."""
    if chip is None:
        return None
    hbm = chip.mem_bw_tbps * 1e12
    if family == "gemm":
        (dtype,), (n, k, m) = record.key, record.axes
        rate = COMPUTE.get(dtype)
        if rate == "int8":  # int8 tensor cores: the fp8 rate, or twice bf16 where there is no fp8 (Ampere)
            peak = chip.fp8_tflops * 1e12 if chip.fp8_tflops else 2 * chip.peak_flops_per_s("bf16")
        elif rate and chip.has_rate(rate):
            peak = chip.peak_flops_per_s(rate)
        else:  # a dtype not named here: the most generous rate, so that the floor never drops a fair row
            peak = max(chip.peak_flops_per_s("bf16"), 2 * chip.peak_flops_per_s("fp8"))
        wb = WEIGHT_BYTES.get(dtype, 0.5)
        compute, memory = 2 * m * n * k / peak, (n * k * wb + m * k * min(wb, 1) + m * n * 2) / hbm
        return (compute, "compute") if compute >= memory else (memory, "HBM")
    if family == "generation_attention":
        (kv_dtype, head_dim), (_, kv_heads, batch, context) = record.key, record.axes
        return batch * context * kv_heads * head_dim * 2 * KV_BYTES.get(kv_dtype, 1) / hbm, "HBM"
    if family == "context_attention":
        (_, head_dim), (heads, _, batch, isl) = record.key, record.axes
        return 4 * batch * heads * head_dim * isl * isl / 2 / chip.peak_flops_per_s("bf16"), "compute"
    if family == "generation_mla":
        (kv_dtype,), (_, batch, context) = record.key, record.axes
        return batch * context * MLA_KV_VALUES * KV_BYTES.get(kv_dtype, 1) / hbm, "HBM"
    if family == "context_mla":
        _, (heads, batch, isl) = record.key, record.axes
        flops = 2 * batch * heads * isl * isl / 2 * (MLA_QK_DIM + MLA_V_DIM)
        return flops / chip.peak_flops_per_s("bf16"), "compute"
    if family in ("allreduce", "nccl"):
        gpus = record.key[-1]
        if family == "nccl" and record.key[0] != "all_reduce":
            return None
        # each GPU sends at least (g-1)/g of the message once (in-switch reduction's bound)
        return record.axes[0] * (gpus - 1) / gpus / (chip.scaleup_gbps_bidir * 1e9 / 2), "scale-up"
    return None
