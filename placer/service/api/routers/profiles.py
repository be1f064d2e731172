"""``/profiles``: measured chip efficiencies (with provenance) that calibrate solves."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from db import repo
from placer.catalog import chip_catalog
from placer.errors import InputError, UnknownChipError
from placer.service.api.deps import SessionDep
from placer.service.api.schemas import Id, Page, ProfileIn, ProfileOut

router = APIRouter(prefix="/profiles", tags=["profiles"])


@router.post("", response_model=ProfileOut, status_code=status.HTTP_201_CREATED)
def add_profile(body: ProfileIn, session: SessionDep):
    """Store a profile; the newest one of a chip calibrates later solves (``use_profiles``)."""
    if body.chip not in chip_catalog() and repo.find_chip(session, body.chip) is None:
        known = sorted(set(chip_catalog()) | {c.name for c in repo.list_chips(session)})
        raise InputError(f"chip: {UnknownChipError(body.chip, known)}")
    fields = body.model_dump(exclude_none=True)
    return repo.add_profile(session, **fields)


@router.get("", response_model=Page[ProfileOut])
def list_profiles(session: SessionDep, chip: Annotated[str | None, Query(max_length=128)] = None,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                  offset: Annotated[int, Query(ge=0, le=2_147_483_647)] = 0):
    rows, total = repo.list_profiles(session, chip, limit, offset)
    return Page[ProfileOut](items=rows, total=total, limit=limit, offset=offset)


@router.get("/{profile_id}", response_model=ProfileOut)
def get_profile(profile_id: Id, session: SessionDep):
    return repo.get_profile(session, profile_id)


@router.delete("/{profile_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_profile(profile_id: Id, session: SessionDep) -> None:
    repo.delete_profile(session, profile_id)
