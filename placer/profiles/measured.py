"""The performance model answered from measured tables, the roofline outside them.

in:  an :class:`~placer.perfmodel.InstanceModel`'s inputs plus a
     :class:`~placer.profiles.tables.MeasuredTable` for the same (chip, tp, model, dtypes)
out: :class:`MeasuredInstanceModel`, an ``InstanceModel`` whose one-forward prefill
     (:meth:`prefill_chunk_s`) and decode step (:meth:`step_s`) come from the table
     where its grid covers the query and from the roofline × efficiency of the base
     model outside it — held within the bounds the grid still sets there
     (:meth:`~placer.profiles.tables.Grid.bounds`: never faster than a measured point the
     query dominates, never slower than one that dominates it); :meth:`source_of_prefill`
     / :meth:`source_of_step` say which.
     Everything else (prompt chunking, max batch, transfers, waits) is the base model's,
     built on these two, so a measured table moves every prediction that depends on them.

:func:`check_against_roofline` refuses a table that beats the hardware: every grid
point must take at least the time of one forward at 100 % of the datasheet peaks,
bound = max(2 · active params · tokens / (tp · peak FLOP/s),
            weight bytes read / (tp · peak HBM bytes/s)),
where the weight bytes read are all weights for a dense model and, for a MoE, the
experts a step of B tokens touches, weights × (1 − (1 − active/total)^B) — the same
rule as the roofline's decode step. Attention and KV are left out, so the bound is
loose but never wrong; a point under it is a benchmark bug (a cached result, a lazy
kernel, a wrong unit), reported like the profiler's own figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from placer.catalog import Chip, ModelConfig
from placer.perfmodel import InstanceModel
from placer.profiles.figures import RooflineExceededError
from placer.profiles.tables import DECODE, PREFILL, Grid, MeasuredTable

ROOFLINE = "roofline"


@dataclass(frozen=True)
class MeasuredInstanceModel(InstanceModel):
    """An instance whose prefill forwards and decode steps are measured (see the module docstring)."""

    table: MeasuredTable = field(kw_only=True)

    def _prefill(self, input_tokens: float, start: float, tokens: float) -> tuple[float, str]:
        return _answer(self.table.prefill, tokens, start, self.table.name,
                       lambda: super(MeasuredInstanceModel, self).prefill_chunk_s(input_tokens, start, tokens))

    def _step(self, batch: float, context_tokens: float) -> tuple[float, str]:
        return _answer(self.table.decode, max(batch, 1.0), context_tokens, self.table.name,
                       lambda: super(MeasuredInstanceModel, self).step_s(batch, context_tokens))

    def prefill_chunk_s(self, input_tokens: float, start: float, tokens: float) -> float:
        """One forward of ``tokens`` new tokens after ``start`` cached: measured inside the grid."""
        return self._prefill(input_tokens, start, tokens)[0]

    def step_s(self, batch: float, context_tokens: float) -> float:
        """One decode step of ``batch`` sequences at ``context_tokens``: measured inside the grid."""
        return self._step(batch, context_tokens)[0]

    def source_of_prefill(self, start: float, tokens: float) -> str:
        """Where the forward of ``tokens`` new tokens after ``start`` cached is answered from:
        ``"measured (<profile>)"``, ``"roofline"``, or ``"roofline held to the measured edge
        (<profile>)"`` when the grid's bound decided (see :meth:`Grid.bounds`)."""
        return self._prefill(start + tokens, start, tokens)[1]

    def source_of_step(self, batch: float, context_tokens: float) -> str:
        """Where the decode step of ``batch`` sequences at ``context_tokens`` is answered from
        (the same three answers as :meth:`source_of_prefill`)."""
        return self._step(batch, context_tokens)[1]


def _answer(grid: Grid | None, size: float, context: float, name: str, roofline) -> tuple[float, str]:
    """(seconds, source): the grid inside its hull; outside, the roofline held within the
    grid's bounds there (latency does not fall as size or context grow)."""
    if grid is not None:
        measured = grid.seconds_at(size, context)
        if measured is not None:
            return measured, f"measured ({name})"
    seconds = roofline()
    if grid is None:
        return seconds, ROOFLINE
    lower, upper = grid.bounds(size, context)
    held = seconds if lower is None else max(seconds, lower)
    held = held if upper is None else min(held, upper)
    return (seconds, ROOFLINE) if held == seconds else (held, f"{ROOFLINE} held to the measured edge ({name})")


def source_of_prefill(model: InstanceModel, start: float, tokens: float) -> str:
    """Where ``model``'s one-forward prefill time comes from (any InstanceModel: a measured table, an
    engine's measured kernels — :mod:`placer.perfmodel.kernel_model` — or the roofline)."""
    answer = getattr(model, "source_of_prefill", None)
    return answer(start, tokens) if answer is not None else ROOFLINE


def source_of_step(model: InstanceModel, batch: float, context_tokens: float) -> str:
    """Where ``model``'s decode step time comes from (any InstanceModel, as :func:`source_of_prefill`)."""
    answer = getattr(model, "source_of_step", None)
    return answer(batch, context_tokens) if answer is not None else ROOFLINE


def source_of_prompt(model: InstanceModel, input_tokens: float, hit_rate: float) -> str:
    """Where a whole prompt's prefill time comes from: its forwards are the chunks
    :meth:`InstanceModel.prefill_s` computes (``prefill_chunk_tokens`` new tokens each,
    after the cached ``hit_rate × input_tokens``); "measured (…)" when the table answers
    every chunk, "roofline" when none, "partly measured (…)" otherwise."""
    new = max(1.0, input_tokens - hit_rate * input_tokens)
    start = input_tokens - new
    sources = set()
    while new > 1e-9:
        tokens = min(new, model.prefill_chunk_tokens)
        sources.add(source_of_prefill(model, start, tokens))
        start, new = start + tokens, new - tokens
    return _combined(sources)


def _combined(sources: set[str]) -> str:
    if len(sources) == 1:
        return next(iter(sources))
    measured = sorted(s for s in sources if s.startswith("measured"))
    return "partly " + measured[0] if measured else " / ".join(sorted(sources))


def peak_bound_s(chip: Chip, tp: int, model: ModelConfig, weight_dtype: str, tokens: float) -> float:
    """Seconds one forward over ``tokens`` tokens cannot beat on ``tp`` chips at 100 % of peak."""
    peak = chip.with_changes(compute_efficiency=1.0, mem_bw_efficiency=1.0)
    dtype = "fp8" if weight_dtype == "fp8" and chip.fp8_tflops else "bf16"
    flops = 2 * model.params_active_b * 1e9 * tokens
    touched = 1.0 - (1.0 - model.active_fraction) ** max(tokens, 1.0)
    weight_read = model.weight_bytes(weight_dtype) * touched
    return max(flops / (tp * peak.peak_flops_per_s(dtype)), weight_read / (tp * peak.mem_bw_bytes_per_s))


def _check_grid(grid: Grid | None, phase: str, table: MeasuredTable, chip: Chip, model: ModelConfig) -> None:
    if grid is None:
        return
    for size, context, seconds in grid.points():
        bound = peak_bound_s(chip, table.key.tp, model, table.key.weight_dtype, size)
        if seconds < bound:
            axis = "tokens" if phase == PREFILL else "batch"
            raise RooflineExceededError(
                f"measured table {table.key} ({table.profile or table.source}): {phase} at {axis} {size:g}, "
                f"context {context:g}: {seconds:.4g} s is faster than one forward at 100 % of "
                f"{chip.name}'s datasheet peaks ({bound:.4g} s)")


def check_against_roofline(table: MeasuredTable, chip: Chip, model: ModelConfig) -> None:
    """Raise :class:`RooflineExceededError` naming the first grid point faster than the peaks."""
    _check_grid(table.prefill, PREFILL, table, chip, model)
    _check_grid(table.decode, DECODE, table, chip, model)
