"""Where measured chip profiles are kept by default, and ``--profiles latest`` read from there.

in:  a :class:`~placer.profiles.records.ChipProfile` (``keep``); the chips a scenario plans with and,
     optionally, the database's loader (``latest_kept``)
out: the profile's JSON under :func:`profile_dir` (``<user data dir>/placer/profiles/<chip>-<UTC time>.json``,
     the folder beside the service's SQLite database), and the newest measured figures per chip from
     that folder and the database together

``placer profile chip`` keeps every result there, ``--out``/``--store`` or not, so a measurement is never
lost; ``--profiles latest`` then finds it. When neither the folder nor the database holds a profile of any
chip asked for, ``latest_kept`` raises :class:`~placer.errors.InputError` (exit 2) naming the chips, both
places and the command that makes one — it never falls back to the roofline in silence.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from placer.errors import InputError
from placer.profiles.records import ChipProfile, measured_from

#: the folder under the user data dir that holds the kept profiles
PROFILES_FOLDER = "profiles"


def data_dir() -> Path:
    """placer's user data dir (platformdirs' ``user_data_dir('placer')`` where installed: the folder of
    the service's default SQLite database; else ``$XDG_DATA_HOME/placer`` or ``~/.local/share/placer``)."""
    try:
        from platformdirs import user_data_dir
    except ImportError:  # the profiler without the service extra
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(base) / "placer"
    return Path(user_data_dir("placer", appauthor=False))


def profile_dir() -> Path:
    """The folder ``placer profile chip`` keeps its results in."""
    return data_dir() / PROFILES_FOLDER


def keep(profile: ChipProfile, folder: Path | None = None) -> Path:
    """Write ``profile`` as ``<chip>-<measured at, UTC>.json`` under ``folder`` (default :func:`profile_dir`);
    its path. InputError naming the folder when it cannot be written."""
    folder = Path(folder) if folder is not None else profile_dir()
    stamp = profile.provenance.measured_at.strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in profile.chip)
    path = folder / f"{safe}-{stamp}.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        profile.save(path)
    except OSError as e:
        raise InputError(f"cannot keep the profile under {str(folder)!r}: {e.strerror}") from None
    return path


def latest_kept(chips: Iterable[str] | None, database: Callable[[set[str] | None], dict] | None = None,
                folder: Path | None = None) -> dict[str, dict]:
    """``--profiles latest``: the newest kept profile of each of ``chips`` from ``folder`` (default
    :func:`profile_dir`), the database's (``database``, when given and reachable) on top. InputError when
    neither holds one for any of ``chips``."""
    wanted = set(chips) if chips is not None else None
    folder = Path(folder) if folder is not None else profile_dir()
    found = measured_from(folder, wanted) if folder.is_dir() else {}
    why_not_db = ""
    if database is not None:
        try:
            found.update(database(wanted))
        except InputError as e:  # the database layer is not installed: the folder alone answers
            why_not_db = f" ({e})"
    if found:
        return found
    names = ", ".join(sorted(wanted)) if wanted else "any chip"
    first = sorted(wanted)[0] if wanted else "NAME"
    raise InputError(f"--profiles latest: no stored profile for {names}: none in {str(folder)!r} nor in the "
                     f"profile database{why_not_db}. Measure one on that chip with `placer profile chip --device "
                     f"cuda --chip {first}` (it keeps the result there), or pass a profile file or directory")
