"""Storing a measured profile where the planner finds it: ``placer profile chip --store``.

in:  a :class:`~placer.profiles.records.ChipProfile` and a database URL (default: the
     service's, :class:`placer.settings.Settings`)
out: a row of the database's ``chip_profiles`` table (efficiencies as columns, the whole
     record as ``results``); ``placer optimize --profiles latest`` reads the newest per
     chip back (:mod:`placer.service.profiles`), a profile file or directory is read by
     :func:`placer.profiles.records.measured_from`.

The ``db`` package (SQLAlchemy, the service extra) is imported only when a profile is stored.
"""

from __future__ import annotations

from placer.errors import InputError
from placer.profiles.records import ChipProfile
from placer.settings import Settings


def _db():
    try:
        import db
        from db import repo
    except ImportError as e:
        raise InputError(f"--store: the database layer is not installed ({e.name}); "
                         "install placer[service] or keep the profile as a file") from None
    return db, repo


def store(profile: ChipProfile, url: str | None = None) -> int:
    """Write ``profile`` to the database's chip_profiles table; its row id."""
    db, repo = _db()
    p = profile.provenance
    software = f"torch {p.torch_version}; triton {p.triton_version or '-'}; driver {p.driver}; {p.device_model}"
    _, factory = db.connect(url or Settings.from_env().database_url)
    with db.session_scope(factory) as session:
        row = repo.add_profile(
            session, chip=profile.chip, compute_efficiency=profile.efficiency.compute_efficiency,
            mem_bw_efficiency=profile.efficiency.mem_bw_efficiency,
            interconnect_efficiency=profile.efficiency.interconnect_efficiency,
            measured_by=p.measured_by[:200], measured_at=p.measured_at, software=software[:200],
            results=profile.model_dump(mode="json"),
        )
        return row.id
