"""The API takes scenarios through the same strict, finite types: Infinity, NaN and booleans
are a 422 naming the field, never stored (they used to be stored as non-standard `Infinity`
and served back as null)."""

from __future__ import annotations

import json

import pytest

from tests.placer.conftest import micro_dict
from tests.placer.service.api.support import AUTH, make_settings


@pytest.fixture
def client(tmp_path):
    from fastapi.testclient import TestClient

    from placer.service.api import create_app

    with TestClient(create_app(make_settings(f"sqlite:///{tmp_path / 'api.db'}")), headers=AUTH) as c:
        yield c


@pytest.mark.parametrize(("raw", "field"), [
    ('"ttft_p90_s": Infinity', "ttft_p90_s"),
    ('"ttft_p90_s": NaN', "ttft_p90_s"),
    ('"ttft_p90_s": true', "ttft_p90_s"),
    ('"ttft_p90_s": 1e308', "ttft_p90_s"),
])
def test_non_finite_or_boolean_numbers_are_422_naming_the_field(client, raw, field):
    body = json.dumps(micro_dict(sla={"ttft_p90_s": 2.0, "tpot_s": 0.05})).replace('"ttft_p90_s": 2.0', raw)
    response = client.post("/scenarios", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert field in response.text
    assert "micro" not in client.get("/scenarios").text  # nothing was stored
