"""Names from a plan made safe to use as folder names, file names and Kubernetes names.

in:  names a plan (or its scenario) chose — datacenters, chips, the scenario — and what is
     built from them (pool, router and host names)
out: :func:`slug` (one DNS-1123 label), :func:`distinct_slugs` (a slug per name, no two alike),
     :func:`inside` (a path checked to stay under a folder)

A plan is user input: a datacenter named ``../../x`` or ``/etc`` must never become a path, and two
datacenters whose names slug alike (``DC A``, ``dc-a``) must not share a folder, a router or a node
selector. The rules:

* a slug is lower case ``[a-z0-9-]``, 1..63 characters, starts and ends with a letter or digit — so
  never empty, never ``.``/``..``, never a ``/``: it cannot leave the folder it is joined to;
* a name whose plain slug is empty (``"日本"``) or longer than 63 characters gets a short hash of
  the original name as a suffix (``-`` + 8 hex digits of its SHA-256): stable from run to run;
* among the names of one kind in a plan, names whose slugs would be alike each get that suffix,
  except a name that already is its own slug (``dc-a`` stays ``dc-a``; ``DC A`` becomes
  ``dc-a-<hash>``). Names that are already DNS labels keep them exactly, so the exports of plans
  with plain names do not change.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from placer.errors import InputError

MAX_LABEL = 63  # a DNS-1123 label (Kubernetes object names and label values)
_HASH = 8  # hex digits of the suffix


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]


def _plain(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def _suffixed(base: str, text: str) -> str:
    """``base`` cut to leave room for ``-<hash of text>``."""
    head = base[:MAX_LABEL - _HASH - 1].rstrip("-")
    return f"{head}-{_digest(text)}" if head else _digest(text)


def slug(text: str) -> str:
    """``text`` as a DNS-1123 label: lower case, runs of other characters become ``-``; a result that
    would be empty or longer than 63 characters ends in a hash of ``text`` instead (never empty)."""
    base = _plain(text)
    return base if base and len(base) <= MAX_LABEL else _suffixed(base, text)


def distinct_slugs(names: Iterable[str], what: str) -> dict[str, str]:
    """Each of ``names`` (one kind: ``what``, e.g. "datacenter") → its slug, no two alike: names whose
    slugs collide get the hash suffix unless the name is its own slug. InputError in the (crafted)
    case that a suffixed slug still meets another name's."""
    names = list(dict.fromkeys(names))
    plain = {name: slug(name) for name in names}
    shared = Counter(plain.values())
    out = {name: s if shared[s] == 1 or name == s else _suffixed(s, name) for name, s in plain.items()}
    owner: dict[str, str] = {}
    for name, s in out.items():
        if s in owner:
            raise InputError(f"{what} names {owner[s]!r} and {name!r} both become {s!r} in the export; rename one")
        owner[s] = name
    return out


def renamed(labels: dict[str, str]) -> dict[str, str]:
    """The entries of ``labels`` (name → slug) whose slug is not simply the name in lower case with
    dashes: those an operator could not guess (a hash suffix), listed in the README."""
    return {name: label for name, label in labels.items() if label != _plain(name)}


def add_file(files: dict[str, str], relative: str, text: str) -> None:
    """``files[relative] = text``, or InputError when two parts of the export would share that file."""
    if relative in files:
        raise InputError(f"export: two parts of the plan would both be written to {relative!r}; rename one")
    files[relative] = text


def inside(root: Path, relative: str) -> Path:
    """``root / relative``, or InputError when it would resolve outside ``root`` (an absolute path,
    ``..``, or a link inside ``root`` that points out of it)."""
    base = Path(root).resolve()
    path = (base / relative).resolve()
    if not path.is_relative_to(base) or path == base:
        raise InputError(f"export: {relative!r} would be written outside --out {str(root)!r}")
    return path
