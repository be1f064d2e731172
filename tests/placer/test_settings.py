"""Settings: validated once; the environment is read by `Settings.from_env` and nowhere else."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from placer.settings import ENVIRONMENT, Settings


@pytest.fixture
def clean_env(monkeypatch):
    for name in ENVIRONMENT.values():
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_settings_refuse_a_short_token():
    with pytest.raises(ValidationError, match="token"):
        Settings(token="short")


def test_from_env_reads_the_placer_variables(clean_env):
    clean_env.setenv("PLACER_DATABASE_URL", "postgresql://u@h/d")
    clean_env.setenv("PLACER_API_TOKEN", "env-token-123")
    clean_env.setenv("PLACER_SCHEDULER", "off")
    clean_env.setenv("PLACER_SOLVE_WORKERS", "5")
    settings = Settings.from_env()
    assert (settings.database_url, settings.token, settings.scheduler, settings.solve_workers) == (
        "postgresql://u@h/d", "env-token-123", False, 5)


def test_explicit_values_win_over_the_environment_and_none_is_not_a_value(clean_env):
    clean_env.setenv("PLACER_DATABASE_URL", "postgresql://u@h/d")
    clean_env.setenv("PLACER_API_TOKEN", "env-token-123")
    settings = Settings.from_env(database_url="sqlite:///x.db", token=None)
    assert settings.database_url == "sqlite:///x.db" and settings.token == "env-token-123"


def test_without_the_environment_the_database_is_the_default_and_there_is_no_token(clean_env):
    settings = Settings.from_env()
    assert settings.database_url is None and settings.token is None and settings.scheduler


def test_the_api_refuses_settings_without_a_token():
    from placer.service.api import create_app

    with pytest.raises(ValueError, match="token"):
        create_app(Settings(database_url="sqlite://"))
