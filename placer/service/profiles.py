"""Stored chip profiles as the planner reads them: ``--profiles latest``.

in:  the chips wanted (None: every stored chip) and a database URL (default: the
     service's, :class:`placer.settings.Settings`)
out: the ``measured`` mapping :func:`placer.problem.resolve` takes — the newest stored
     profile per chip (:func:`db.repo.latest_profiles`), for
     :func:`placer.profiles.records.measured_from` as its ``latest`` loader.
"""

from __future__ import annotations

import db
from db import repo
from placer.settings import Settings


def latest_measured(chips: set[str] | None, url: str | None = None) -> dict[str, dict]:
    """The newest stored profile of each of ``chips`` (None: every stored chip)."""
    _, factory = db.connect(url or Settings.from_env().database_url)
    with db.session_scope(factory) as session:
        return repo.latest_profiles(session, chips)
