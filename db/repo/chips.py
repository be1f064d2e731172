"""Custom chips and measured chip profiles.

in:  a Session; a chip spec mapping (``placer.specs.ChipSpec`` as JSON) or a profile's fields
out: ``Chip`` / ``ChipProfile`` rows; ``latest_profiles`` → the ``measured`` mapping a solve takes
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.errors import NotFoundError
from db.models import Chip, ChipProfile
from db.repo.base import add_unique, get_row, page

EFFICIENCY_FIELDS = ("compute_efficiency", "mem_bw_efficiency", "interconnect_efficiency")


# --- chips --------------------------------------------------------------------------

def list_chips(session: Session) -> list[Chip]:
    return list(session.scalars(select(Chip).order_by(Chip.name)))


def find_chip(session: Session, name: str) -> Chip | None:
    return session.scalar(select(Chip).where(Chip.name == name))


def get_chip(session: Session, name: str) -> Chip:
    row = find_chip(session, name)
    if row is None:
        raise NotFoundError("chip", name)
    return row


def create_chip(session: Session, spec: dict[str, Any]) -> Chip:
    name = spec["name"]
    return add_unique(session, Chip(name=name, spec=spec), f"chip {name!r}", find_chip(session, name) is not None)


def update_chip(session: Session, name: str, spec: dict[str, Any]) -> Chip:
    row = get_chip(session, name)
    row.spec = {**spec, "name": name}
    session.flush()
    return row


def delete_chip(session: Session, name: str) -> None:
    session.delete(get_chip(session, name))
    session.flush()


# --- chip profiles ------------------------------------------------------------------

def add_profile(session: Session, **fields: Any) -> ChipProfile:
    row = ChipProfile(**fields)
    session.add(row)
    session.flush()
    return row


def get_profile(session: Session, profile_id: int) -> ChipProfile:
    return get_row(session, ChipProfile, profile_id, "profile")


def list_profiles(session: Session, chip: str | None = None, limit: int = 50,
                  offset: int = 0) -> tuple[list[ChipProfile], int]:
    query = select(ChipProfile).order_by(ChipProfile.measured_at.desc(), ChipProfile.id.desc())
    if chip is not None:
        query = query.where(ChipProfile.chip == chip)
    return page(session, query, limit, offset)


def delete_profile(session: Session, profile_id: int) -> None:
    session.delete(get_profile(session, profile_id))
    session.flush()


def latest_profiles(session: Session, chips: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The newest profile of each chip (None: every stored chip), as the ``measured`` mapping
    placer.optimize takes."""
    out: dict[str, dict[str, Any]] = {}
    if chips is None:
        chips = session.scalars(select(ChipProfile.chip).distinct())
    for chip in sorted(set(chips)):
        row = session.scalar(select(ChipProfile).where(ChipProfile.chip == chip)
                             .order_by(ChipProfile.measured_at.desc(), ChipProfile.id.desc()).limit(1))
        if row is None:
            continue
        figures = {f: getattr(row, f) for f in EFFICIENCY_FIELDS if getattr(row, f) is not None}
        if figures:
            figures["profile"] = f"profile {row.id} ({row.measured_at.date().isoformat()})"
            out[chip] = figures
    return out
