"""db's plain exceptions reach users as placer's typed errors: 404/409, exit code 2."""

from __future__ import annotations

from db import errors as db_errors
from placer.errors import InputError
from placer.service.errors import ConflictError, NotFoundError, typed, user_error


def test_db_errors_map_to_typed_errors_with_the_same_message():
    missing = typed(db_errors.NotFoundError("plan", 7))
    assert isinstance(missing, NotFoundError) and missing.http_status == 404 and missing.exit_code == 2
    assert str(missing) == "plan 7 not found"
    clash = typed(db_errors.ConflictError("scenario 'micro' already exists"))
    assert isinstance(clash, ConflictError) and clash.http_status == 409 and clash.exit_code == 2
    assert str(clash) == "scenario 'micro' already exists"


def test_user_error_keeps_placer_errors_and_leaves_bugs_alone():
    bad = InputError("objective: unknown 'x'")
    assert user_error(bad) is bad
    assert str(user_error(db_errors.NotFoundError("job", "nightly"))) == "job 'nightly' not found"
    assert user_error(KeyError("x")) is None
