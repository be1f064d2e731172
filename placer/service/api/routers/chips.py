"""``/chips``: the bundled catalog plus custom chips (ChipSpec: new names, or ``base`` + overrides)."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Path, status

from db import repo
from placer.catalog import chip_catalog
from placer.errors import InputError, UnknownChipError
from placer.service.api.deps import SessionDep
from placer.service.api.schemas import ChipOut
from placer.service.errors import ConflictError
from placer.specs import ChipSpec

router = APIRouter(prefix="/chips", tags=["chips"])
ChipName = Annotated[str, Path(min_length=1, max_length=128)]


def _custom_out(row) -> ChipOut:
    return ChipOut(name=row.name, source="custom", spec=row.spec)


def _check(spec: ChipSpec) -> dict:
    if len(spec.name) > 128 or not spec.name.strip():
        raise InputError(f"name: must be 1 to 128 characters, got {spec.name!r}"[:300])
    if spec.base is not None and spec.base not in chip_catalog():
        raise InputError(f"base: {UnknownChipError(spec.base, sorted(chip_catalog()))}")
    return spec.model_dump(mode="json", exclude_none=True)


@router.get("", response_model=list[ChipOut])
def list_chips(session: SessionDep):
    """Every chip a scenario may name: the catalog's, then the custom ones."""
    out = [ChipOut(name=c.name, source="catalog", spec=dataclasses.asdict(c)) for c in chip_catalog().values()]
    return out + [_custom_out(r) for r in repo.list_chips(session)]


@router.get("/{name}", response_model=ChipOut)
def get_chip(name: ChipName, session: SessionDep):
    catalog = chip_catalog()
    if name in catalog:
        return ChipOut(name=name, source="catalog", spec=dataclasses.asdict(catalog[name]))
    return _custom_out(repo.get_chip(session, name))


@router.post("", response_model=ChipOut, status_code=status.HTTP_201_CREATED)
def create_chip(spec: ChipSpec, session: SessionDep):
    """Add a custom chip; 409 if the name is taken (by the catalog or another custom chip)."""
    body = _check(spec)
    if spec.name in chip_catalog():
        raise ConflictError(f"chip {spec.name!r} is in the bundled catalog; "
                            f"add a new name with base: {spec.name} to override its figures")
    return _custom_out(repo.create_chip(session, body))


@router.put("/{name}", response_model=ChipOut)
def replace_chip(name: ChipName, spec: ChipSpec, session: SessionDep):
    if spec.name != name:
        raise InputError(f"name: the body names {spec.name!r} but the path names {name!r}"[:300])
    body = _check(spec)
    if name in chip_catalog():
        raise ConflictError(f"chip {name!r} is in the bundled catalog and cannot be changed")
    return _custom_out(repo.update_chip(session, name, body))


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_chip(name: ChipName, session: SessionDep) -> None:
    if name in chip_catalog():
        raise ConflictError(f"chip {name!r} is in the bundled catalog and cannot be deleted")
    repo.delete_chip(session, name)
