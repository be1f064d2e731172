"""One instance's performance model from profiles: the face ``placer estimate`` and the planner share.

in:  a chip, a tp, a model, dtypes, and the measured mapping (:func:`placer.profiles.records.measured_from`)
     or the profile sources themselves
out: :func:`matching_tables` — the tables measured for exactly this model and these dtypes,
     by (chip, tp), each checked against the chip's datasheet peaks, and the others with the
     reason they do not apply; :func:`measured_instance` — the
     :class:`~placer.perfmodel.InstanceModel` of one instance (measured efficiencies applied;
     a :class:`~placer.profiles.measured.MeasuredInstanceModel` when a table matches).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from placer.catalog import Chip, ModelConfig
from placer.perfmodel import InstanceModel
from placer.perfmodel.engines import engine_model
from placer.profiles.measured import MeasuredInstanceModel, check_against_roofline
from placer.profiles.records import LatestLoader, measured_from_all
from placer.profiles.tables import MeasuredTable


def matching_tables(found: Iterable[MeasuredTable], chips: dict[str, Chip], model: ModelConfig, weight_dtype: str,
                    kv_dtype: str) -> tuple[dict[tuple[str, int], MeasuredTable], tuple[str, ...]]:
    """The tables measured for this model and these dtypes, by (chip, tp); a later one for
    the same (chip, tp) replaces an earlier one. The rest, each with the reason."""
    tables, ignored = {}, []
    for table in found:
        k = table.key
        differs = [f"{what} {got} (scenario: {want})" for what, got, want in
                   (("model", k.model, model.name), ("weight_dtype", k.weight_dtype, weight_dtype),
                    ("kv_dtype", k.kv_dtype, kv_dtype)) if got != want]
        if differs:
            ignored.append(f"table {k} from {table.name}: not used, {', '.join(differs)}")
            continue
        check_against_roofline(table, chips[k.chip], model)
        tables[(k.chip, k.tp)] = table
    return tables, tuple(ignored)


def measured_instance(model: ModelConfig, chip: Chip, tp: int, weight_dtype: str, kv_dtype: str,
                      profiles: str | Path | Sequence[str | Path] | None = None, prefill_chunk_tokens: int = 8192,
                      latest: LatestLoader | None = None, engine: str = "roofline") -> InstanceModel:
    """The model of one ``tp``-chip instance of ``chip`` serving ``model``, from ``profiles``
    (a profile JSON, a CSV, a directory, ``"latest"`` with ``latest=``, or a list of them;
    None: the roofline). Measured efficiencies of the chip replace its defaults; a table for
    exactly (chip, tp, model, dtypes) makes it a :class:`MeasuredInstanceModel`. Bad files are
    :class:`~placer.errors.InputError`; a table faster than the chip's peaks is
    :class:`~placer.profiles.figures.RooflineExceededError`. Without a table, ``engine`` answers
    (:func:`~placer.perfmodel.engines.engine_model`: its measured kernels where they cover the chip);
    a table, the user's own measurement of the whole forward, wins over the kernels."""
    figures: dict = {}
    if profiles is not None:
        sources = [profiles] if isinstance(profiles, (str, Path)) else list(profiles)
        figures = dict(measured_from_all(sources, chips=[chip.name], latest=latest).get(chip.name, {}))
    found = figures.pop("tables", [])
    chip = chip.with_changes(**figures) if figures else chip
    tables, _ = matching_tables(found, {chip.name: chip}, model, weight_dtype, kv_dtype)
    table = tables.get((chip.name, tp))
    args = (chip, tp, model, weight_dtype, kv_dtype, prefill_chunk_tokens)
    if table is None:
        return engine_model(InstanceModel(*args), engine)
    return MeasuredInstanceModel(*args, table=table)
