"""The engines' measured per-kernel tables, as placer ships them, and interpolation in them.

Standard library only (the planner reads these at plan time; no numpy, pandas or pyarrow).

in:  ``placer/kernels/data/<system>/<engine>-<version>/<family>.csv[.gz]`` + ``provenance.json``,
     written by :mod:`placer.kernels.importer` from NVIDIA AIConfigurator's measured database
     (docs/kernels.md); one row per measured kernel shape, latency in seconds.
out: :func:`available`, :func:`system_for_chip`, :func:`load` → :class:`OpTables`, whose
     ``*_s`` methods answer the seconds of one kernel call, or ``None`` where the shape lies
     outside what was measured (the caller falls back to the roofline and says so).

Interpolation, and why (the same spirit as :mod:`placer.profiles.tables`):

* **Categorical keys match exactly** (dtype, KV dtype, head dim, MoE routing and expert
  layout, GPU count): a kernel at another dtype or layout is another kernel.
* **Numeric axes in log(1 + x), latency in log(seconds), one axis at a time.** Each family's
  table is a tree over its axes (:data:`FAMILIES`); a query brackets its value between the two
  nearest measured values of the first axis, answers each bracket's sub-table the same way,
  and blends the two in log-log; along the last axis, a monotone cubic (PCHIP) through the
  points in log-log (:mod:`placer.kernels.tree`). Latency grows like a power of size once past fixed costs, so
  log-log is close to linear between grid points; the tree form works on ragged grids (the
  database skips e.g. batch 256 at 32k context) without inventing the missing corners.
  Grid points are answered exactly. The held-out check (``bench/bench_kernel_holdout.py``)
  is the evidence: every fifth shape predicted from the rest.
* **Monotone along the last axis** (tokens m, batch, sequence, message size): the importer's
  rows are medians with noise, and the database holds isolated hiccups (one decode-attention
  point 25x slower than the next larger context). The series of each leaf is made
  non-decreasing in log seconds by pool-adjacent-violators with MEDIAN pooling (least absolute
  deviations: a lone outlier is pulled to its neighbours instead of lifting every larger shape
  after it, as least squares or a running maximum would) then a running maximum, so a bigger
  batch never reads faster. ``OpTables.cleanup_max_rel`` records how far that moved any point (of the keys built so far:
  a key's tree is built on its first lookup).
* **No extrapolation.** Outside a measured range in any axis, or at a key never measured,
  the answer is ``None``: the roofline answers there, labelled as such.
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from placer.kernels.tree import Node, build_tree, tree_log_seconds

DATA_DIR = Path(__file__).resolve().parent / "data"


#: GEMM rows where the kernels' time steps: just after each multiple of 16 (the MMA tiles' row
#: granularity; the database measures both sides of every such step it samples, m = 16/17 … 4352/4353)
GEMM_TILE_ROWS = 16


@dataclass(frozen=True)
class Family:
    """One op family's table layout: exact-match ``keys`` then interpolated ``axes`` (last: monotone)."""

    name: str
    keys: tuple[str, ...]
    axes: tuple[str, ...]
    cubic: bool = True  # a monotone cubic along the last axis; False: straight log-log segments
    tile: int = 0  # with cubic False: the last axis steps just after multiples of this (tree._staircase)


#: Every family the importer writes, with the columns of its CSV (keys, axes, then ``latency_s``).
FAMILIES: dict[str, Family] = {f.name: f for f in (
    # m is a staircase (one step per tile, both sides of each step measured): straight segments
    Family("gemm", ("dtype",), ("n", "k", "m"), cubic=False, tile=GEMM_TILE_ROWS),
    Family("context_attention", ("kv_dtype", "head_dim"), ("heads", "kv_heads", "batch", "isl")),
    Family("generation_attention", ("kv_dtype", "head_dim"), ("heads", "kv_heads", "batch", "context")),
    # MLA: heads are the heads ON ONE GPU (the model's heads / tp), as the database measures them
    Family("context_mla", ("kv_dtype",), ("heads", "batch", "isl")),
    Family("generation_mla", ("kv_dtype",), ("heads", "batch", "context")),
    Family("moe", ("dtype", "distribution", "hidden", "inter", "topk", "experts", "tp", "ep"), ("tokens",)),
    # the engine's own all-reduce (custom kernels) ...
    Family("allreduce", ("dtype", "gpus"), ("message_bytes",)),
    # ... and NCCL's collectives (op: all_reduce, all_gather, reduce_scatter, alltoall)
    Family("nccl", ("op", "dtype", "gpus"), ("message_bytes",)),
    # expert-parallel dispatch/combine (DeepEP-style kernels) by tokens per rank
    Family("moe_a2a", ("backend", "phase", "dtype", "ep", "hidden", "topk", "experts"), ("tokens",)),
)}

#: The MoE routing the tables answer by default: AIConfigurator's own default for its estimates —
#: a power law of exponent 1.01 over experts, i.e. the mild imbalance real routers show; "balanced"
#: (every expert the same load) is optimistic for a served model.
DEFAULT_DISTRIBUTION = "power_law_1.01"

#: placer's catalog chip names → the database's system names (chips.csv ``name``).
CHIP_SYSTEMS: dict[str, str] = {
    "H100-SXM": "h100_sxm",
    "H200-SXM": "h200_sxm",
    "B200": "b200_sxm",
    "A100-80G-SXM": "a100_sxm",
    "L40S": "l40s",
    "GB200": "gb200",
    "B300": "b300_sxm",
    "GB300": "gb300",
    "H100-PCIe": "h100_pcie",
    "A100-80G-PCIe": "a100_pcie",
    "L4": "l4",
}

ENGINES = ("trtllm", "sglang", "vllm")
_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


def system_for_chip(chip_name: str) -> str | None:
    """The database system measured on ``chip_name`` (catalog spelling, case-insensitive), or None."""
    wanted = chip_name.strip().lower()
    return next((s for c, s in CHIP_SYSTEMS.items() if c.lower() == wanted), None)


def _version_key(version: str) -> tuple:
    """A sortable key for engine versions like '1.3.0rc20', '0.5.6.post2', '0.24.0'."""
    parts = []
    for piece in re.split(r"[.+-]", version):
        m = re.match(r"^(\d+)(.*)$", piece)
        if m:
            num, rest = int(m.group(1)), m.group(2)
            # a pre-release (rc, a, b, dev) sorts before the release; post after
            tag = (0, rest) if rest and not rest.startswith("post") else (2, rest) if rest else (1, "")
            parts.append((num, tag))
        else:
            parts.append((-1, (1 if piece.startswith("post") else -1, piece)))
    return tuple(parts)


def available(data_dir: Path | None = None) -> list[tuple[str, str, str]]:
    """Every shipped (system, engine, version), sorted (read once per directory and process)."""
    return list(_available(str(data_dir or DATA_DIR)))


@functools.lru_cache(maxsize=16)
def _available(root_path: str) -> tuple[tuple[str, str, str], ...]:
    root = Path(root_path)
    found = []
    if root.is_dir():
        for system_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for table_dir in sorted(p for p in system_dir.iterdir() if p.is_dir()):
                engine, _, version = table_dir.name.partition("-")
                if version and (table_dir / "provenance.json").is_file():
                    found.append((system_dir.name, engine, version))
    return tuple(sorted(found, key=lambda t: (t[0], t[1], _version_key(t[2]))))


def load(system: str, engine: str, version: str | None = None, data_dir: Path | None = None) -> OpTables | None:
    """The tables of (system, engine, version) — the latest shipped version when ``version`` is None;
    None when nothing is shipped for it. Cached: one object per table directory."""
    versions = [v for s, e, v in available(data_dir) if s == system and e == engine]
    if not versions:
        return None
    if version is None:
        version = versions[-1]
    elif version not in versions:
        return None
    return _load_dir(str((data_dir or DATA_DIR) / system / f"{engine}-{version}"))


@functools.lru_cache(maxsize=64)
def _load_dir(path: str) -> OpTables:
    return OpTables(Path(path))


def forget() -> None:
    """Drop what :func:`available` and :func:`load` cached (after tables were written)."""
    _available.cache_clear()
    _load_dir.cache_clear()


# --- reading the shipped CSVs ---------------------------------------------------------------

def _read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of one family CSV (``.csv`` or ``.csv.gz``)."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8"))))
    return (rows[0], rows[1:]) if rows else ([], [])


def read_rows(path: Path) -> list[dict[str, str]]:
    """Rows of one family CSV (``.csv`` or ``.csv.gz``) as dicts."""
    header, rows = _read_table(path)
    return [dict(zip(header, r)) for r in rows]


def _key(values) -> tuple[str, ...]:
    return tuple(_norm(v) for v in values)


def _norm(value) -> str:
    """One spelling per key value: integers without '.0', strings lower-case."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip().lower()
    return str(int(float(text))) if re.fullmatch(r"-?\d+(\.0+)?", text) else text


class _Family:
    """One family's keys → interpolation trees, each tree built from its points on first use: a plan
    or an estimate asks a few of a family's thousands of keys (building them all cost ~1 s a table)."""

    def __init__(self, points: dict[tuple[str, ...], dict], cubic: bool, on_build, tile: int = 0) -> None:
        self._points, self._cubic, self._on_build, self._tile = points, cubic, on_build, tile
        self._trees: dict[tuple[str, ...], Node] = {}

    def get(self, key: tuple[str, ...]) -> Node | None:
        tree = self._trees.get(key)
        if tree is None and key in self._points:
            tree, moved = build_tree(self._points[key], cubic=self._cubic, tile=self._tile)
            self._trees[key] = tree
            self._on_build(moved)
        return tree

    def __iter__(self):
        return iter(self._points)


@dataclass
class OpTables:
    """One (system, engine, version)'s measured op tables; every ``*_s`` is seconds or None."""

    directory: Path
    _families: dict[str, _Family] = field(default_factory=dict, repr=False)
    cleanup_max_rel: dict[str, float] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.provenance: dict = json.loads((self.directory / "provenance.json").read_text())
        self.system: str = self.provenance["system"]
        self.engine: str = self.provenance["engine"]
        self.version: str = self.provenance["version"]
        self._memo: dict[tuple, float | None] = {}

    def __hash__(self) -> int:
        return hash(str(self.directory))

    # -- families ---------------------------------------------------------------------------
    def families(self) -> list[str]:
        """The op families this (system, engine, version) ships."""
        return [name for name in FAMILIES if self._path(name) is not None]

    def _path(self, name: str) -> Path | None:
        for suffix in (".csv.gz", ".csv"):
            p = self.directory / f"{name}{suffix}"
            if p.is_file():
                return p
        return None

    def _family(self, name: str) -> _Family:
        if name not in self._families:
            fam, path = FAMILIES[name], self._path(name)
            grouped: dict[tuple[str, ...], dict] = {}
            if path is not None:
                header, rows = _read_table(path)
                try:
                    key_at = [header.index(k) for k in fam.keys]
                    axes_at = [header.index(a) for a in fam.axes]
                    latency_at = header.index("latency_s")
                except ValueError:
                    raise ValueError(f"{path}: the columns must be {', '.join((*fam.keys, *fam.axes))}, "
                                     f"latency_s; found {', '.join(header)}") from None
                spelled: dict[tuple[str, ...], tuple[str, ...]] = {}
                for row in rows:
                    raw = tuple(row[i] for i in key_at)
                    key = spelled.get(raw)
                    if key is None:
                        key = spelled[raw] = _key(raw)
                    grouped.setdefault(key, {})[tuple(float(row[i]) for i in axes_at)] = float(row[latency_at])
            self.cleanup_max_rel[name] = 0.0

            def moved(rel: float, name: str = name) -> None:
                self.cleanup_max_rel[name] = max(self.cleanup_max_rel[name], rel)

            self._families[name] = _Family(grouped, fam.cubic, moved, fam.tile)
        return self._families[name]

    def lookup(self, name: str, key: tuple, axes: tuple[float, ...]) -> float | None:
        """Seconds of family ``name`` at exact ``key`` and interpolated ``axes``; None if not covered."""
        memo_key = (name, key, axes)
        if memo_key in self._memo:
            return self._memo[memo_key]
        tree = self._family(name).get(_key(key))
        value = None
        if tree is not None and all(a >= 0 and math.isfinite(a) for a in axes):
            log_s = tree_log_seconds(tree, tuple(float(a) for a in axes))
            value = None if log_s is None else math.exp(log_s)
        if len(self._memo) < 1_000_000:
            self._memo[memo_key] = value
        return value

    def keys(self, name: str) -> list[tuple[str, ...]]:
        """The exact-match keys measured in family ``name`` (what a caller may ask for)."""
        return sorted(self._family(name))

    # -- the ops -------------------------------------------------------------------------------
    def gemm_s(self, dtype: str, m: float, n: float, k: float) -> float | None:
        """One GEMM (m tokens × k) @ (k × n); dtype 'bf16', 'fp8' (per-tensor), 'fp8_block', 'fp4' (NVFP4)."""
        return self.lookup("gemm", (dtype,), (n, k, m))

    def context_attention_s(self, batch: float, isl: float, heads: float, kv_heads: float, head_dim: int,
                            kv_dtype: str, prefix: float = 0) -> float | None:
        """Causal prefill attention of ``batch`` sequences of ``isl`` new tokens (per-GPU heads).

        With a cached ``prefix``, the work of the new tokens is the causal work over prefix + isl
        less that over the prefix alone, so t(prefix + isl) − t(prefix), and never less than the
        new tokens alone, t(isl)."""
        alone = self.lookup("context_attention", (kv_dtype, head_dim), (heads, kv_heads, batch, isl))
        if not prefix or alone is None:
            return alone
        whole = self.lookup("context_attention", (kv_dtype, head_dim), (heads, kv_heads, batch, prefix + isl))
        before = self.lookup("context_attention", (kv_dtype, head_dim), (heads, kv_heads, batch, prefix))
        if whole is None or before is None:
            return None
        return max(alone, whole - before)

    def generation_attention_s(self, batch: float, context: float, heads: float, kv_heads: float,
                               head_dim: int, kv_dtype: str) -> float | None:
        """One decode step's attention: ``batch`` sequences each reading ``context`` cached tokens."""
        return self.lookup("generation_attention", (kv_dtype, head_dim), (heads, kv_heads, batch, context))

    def context_mla_s(self, batch: float, isl: float, heads: float, kv_dtype: str, tp: int = 1) -> float | None:
        """MLA prefill attention; ``heads`` the model's query heads, split over ``tp`` GPUs."""
        return self.lookup("context_mla", (kv_dtype,), (heads / tp, batch, isl))

    def generation_mla_s(self, batch: float, context: float, heads: float, kv_dtype: str,
                         tp: int = 1) -> float | None:
        """MLA decode attention; ``heads`` the model's query heads, split over ``tp`` GPUs."""
        return self.lookup("generation_mla", (kv_dtype,), (heads / tp, batch, context))

    def moe_s(self, dtype: str, tokens: float, hidden: int, inter: int, topk: int, experts: int,
              tp: int = 1, ep: int = 1, distribution: str = DEFAULT_DISTRIBUTION) -> float | None:
        """The grouped expert GEMMs of one MoE layer on one GPU for ``tokens`` tokens (the model's
        hidden/intermediate sizes, top-k, experts; experts split ``ep`` ways, each expert's
        intermediate ``tp`` ways). Measured for the database's model configurations only."""
        return self.lookup("moe", (dtype, distribution, hidden, inter, topk, experts, tp, ep), (tokens,))

    def allreduce_s(self, dtype: str, gpus: int, message_bytes: float) -> float | None:
        """One all-reduce of ``message_bytes`` over ``gpus`` GPUs: the engine's own all-reduce
        where measured, else NCCL's (both by bytes; NCCL's 16-bit rows answer bf16/fp16)."""
        if gpus <= 1:
            return 0.0
        own = self.lookup("allreduce", (dtype, gpus), (message_bytes,))
        if own is not None:
            return own
        return self.nccl_s("all_reduce", dtype, gpus, message_bytes)

    def nccl_s(self, op: str, dtype: str, gpus: int, message_bytes: float) -> float | None:
        """NCCL's ``op`` ('all_reduce', 'all_gather', 'reduce_scatter', 'alltoall') of ``message_bytes``."""
        if gpus <= 1:
            return 0.0
        return self.lookup("nccl", (op, _nccl_dtype(dtype), gpus), (message_bytes,))

    def alltoall_s(self, phase: str, tokens: float, hidden: int, topk: int, experts: int, ep: int,
                   dtype: str = "bf16", backend: str | None = None) -> float | None:
        """Expert-parallel ``phase`` ('dispatch' or 'combine') of ``tokens`` tokens per rank, where the
        database measured it (DeepEP kernels); ``backend`` None takes the low-latency kernel for
        ≤ 128 tokens per rank and the high-throughput one above, as the engines do."""
        name = backend or ("deepep_ll" if tokens <= 128 else "deepep_ht")
        for key in self.keys("moe_a2a"):
            b, p, d, e, h, k, x = key
            if (b.endswith(name) and p == phase and d in (_norm(dtype), "default")
                    and (e, h, k, x) == _key((ep, hidden, topk, experts))):
                return self.lookup("moe_a2a", key, (tokens,))
        return None


def _nccl_dtype(dtype: str) -> str:
    """NCCL's rows are by element type: 'half' for 16-bit, 'int8' for 8-bit."""
    return "half" if _BYTES.get(dtype.lower(), 2) == 2 else "int8"
