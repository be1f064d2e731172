"""Calibration: measured profiles → the ``measured`` mapping the planner takes.

in:  a source: a ChipProfile JSON file, a directory of them, or ``"latest"`` (the
     newest stored profile per chip in the database, :mod:`db.repo`)
out: ``{chip_name: {"compute_efficiency": …, "mem_bw_efficiency": …,
     "interconnect_efficiency": …, "profile": "<provenance>"}}`` with only the
     fields that were measured (:func:`placer.profiles.records.measured_from` reads
     files and directories; this module adds the database).

Also :func:`store`, which writes a profile into the database's ``chip_profiles``
table (efficiencies as columns, the whole record as ``results``). The ``db`` package
(SQLAlchemy, the service extra) is imported only when the database is used.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path

from placer.errors import InputError
from placer.profiles import records
from placer.profiles.records import LATEST, ChipProfile


def measured_from(source: str | Path, chips: Iterable[str] | None = None, url: str | None = None) -> dict[str, dict]:
    """The measured efficiencies per chip from ``source`` (file, directory or ``"latest"``).

    ``chips`` restricts the answer to those chips; ``url`` names the database for
    ``"latest"`` (default: ``PLACER_DATABASE_URL`` or the user's SQLite file).
    Chips whose profile measured none of the three efficiencies are left out.
    """
    return records.measured_from(source, chips, latest=partial(latest_measured, url=url))


def _db():
    try:
        import db
        from db import repo
    except ImportError as e:
        raise InputError(f"--profiles {LATEST}: the database layer is not installed ({e.name}); "
                         "install placer[service] or pass a profile file or directory") from None
    return db, repo


def latest_measured(chips: set[str] | None, url: str | None = None) -> dict[str, dict]:
    """The newest stored profile per chip (``chips``; None: every stored chip) as the ``measured`` mapping."""
    db, repo = _db()
    from sqlalchemy import select

    from db.models import ChipProfile as Row

    _, factory = db.connect(url)
    with db.session_scope(factory) as session:
        chips = chips if chips is not None else set(session.scalars(select(Row.chip).distinct()))
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
