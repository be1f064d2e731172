"""Calibration: measured profiles → the ``measured`` mapping the planner takes.

in:  a source: a ChipProfile JSON file, a directory of them, or ``"latest"`` (the
     newest stored profile per chip in the database, :mod:`db.repo`)
out: ``{chip_name: {"compute_efficiency": …, "mem_bw_efficiency": …,
     "interconnect_efficiency": …, "profile": "<provenance>"}}`` with only the
     fields that were measured; :func:`placer.problem.resolve` keeps the catalog
     default (the roofline fallback) for every other field and every other chip.

Also :func:`store`, which writes a profile into the database's ``chip_profiles``
table (efficiencies as columns, the whole record as ``results``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from placer.errors import InputError
from profiler.record import ChipProfile

LATEST = "latest"


def _load(path: Path) -> ChipProfile:
    try:
        return ChipProfile.load(path)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"profile {str(path)!r}: {where}: {first['msg']}") from None


def load_profiles(source: str | Path) -> list[tuple[ChipProfile, Path]]:
    """Every chip profile a file or a directory holds (other JSON in a directory is skipped)."""
    path = Path(source)
    if path.is_file():
        return [(_load(path), path)]
    if path.is_dir():
        out = []
        for file in sorted(path.glob("*.json")):
            try:
                kind = json.loads(file.read_text()).get("kind")
            except (OSError, ValueError, AttributeError):
                continue
            if kind == "chip":
                out.append((_load(file), file))
        return out
    raise InputError(f"--profiles: {str(source)!r} is neither a profile file, a directory of them, "
                     f"nor {LATEST!r}")


def newest_per_chip(profiles: Iterable[tuple[ChipProfile, Path]]) -> dict[str, tuple[ChipProfile, Path]]:
    best: dict[str, tuple[ChipProfile, Path]] = {}
    for profile, path in profiles:
        held = best.get(profile.chip)
        if held is None or profile.provenance.measured_at > held[0].provenance.measured_at:
            best[profile.chip] = (profile, path)
    return best


def measured_from(source: str | Path, chips: Iterable[str] | None = None, url: str | None = None) -> dict[str, dict]:
    """The measured efficiencies per chip from ``source`` (file, directory or ``"latest"``).

    ``chips`` restricts the answer to those chips; ``url`` names the database for
    ``"latest"`` (default: ``PLACER_DATABASE_URL`` or the user's SQLite file).
    Chips whose profile measured none of the three efficiencies are left out.
    """
    wanted = set(chips) if chips is not None else None
    if str(source) == LATEST:
        return _latest_from_db(wanted, url)
    out = {}
    for chip, (profile, path) in newest_per_chip(load_profiles(source)).items():
        if wanted is not None and chip not in wanted:
            continue
        fields = profile.measured_fields(where=path.name)
        if len(fields) > 1:  # more than the provenance alone
            out[chip] = fields
    return out


def _db():
    try:
        import db
        from db import repo
    except ImportError as e:
        raise InputError(f"--profiles {LATEST}: the database layer is not installed ({e.name}); "
                         "install placer[service] or pass a profile file or directory") from None
    return db, repo


def _latest_from_db(wanted: set[str] | None, url: str | None) -> dict[str, dict]:
    db, repo = _db()
    from sqlalchemy import select

    from db.models import ChipProfile as Row

    _, factory = db.connect(url)
    with db.session_scope(factory) as session:
        chips = wanted if wanted is not None else set(session.scalars(select(Row.chip).distinct()))
        return repo.latest_profiles(session, chips)


def store(profile: ChipProfile, url: str | None = None) -> int:
    """Write ``profile`` to the database's chip_profiles table; its row id."""
    db, repo = _db()
    p = profile.provenance
    software = f"torch {p.torch_version}; triton {p.triton_version or '-'}; driver {p.driver}; {p.device_model}"
    _, factory = db.connect(url)
    with db.session_scope(factory) as session:
        row = repo.add_profile(
            session, chip=profile.chip, compute_efficiency=profile.efficiency.compute_efficiency,
            mem_bw_efficiency=profile.efficiency.mem_bw_efficiency,
            interconnect_efficiency=profile.efficiency.interconnect_efficiency,
            measured_by=p.measured_by[:200], measured_at=p.measured_at, software=software[:200],
            results=profile.model_dump(mode="json"),
        )
        return row.id
