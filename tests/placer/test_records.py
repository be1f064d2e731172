"""The request log's one record: validated once, the same JSON in and out."""

from __future__ import annotations

import json

import pytest

from placer.records import RequestRecord

GOOD = {"request_id": "r1", "arrival_unix_s": 1.7e9, "input_tokens": 1000, "output_tokens": 50,
        "prefix_hit_tokens": 900, "pipeline": "P-RLD-MD", "ttft_s": 0.3, "tpot_s": 0.02}


def test_a_record_survives_its_json_line():
    record = RequestRecord.from_dict(GOOD)
    again = RequestRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record and again.pipeline == "P-RLD-MD" and again.finish_reason is None


@pytest.mark.parametrize("bad, field", [
    ({"pipeline": "P-X"}, "pipeline"),
    ({"input_tokens": -1}, "input_tokens"),
    ({"output_tokens": 2.5}, "output_tokens"),
    ({"ttft_s": float("nan")}, "ttft_s"),
    ({"tpot_s": -0.1}, "tpot_s"),
    ({"arrival_unix_s": float("inf")}, "arrival_unix_s"),
])
def test_a_bad_field_is_named_with_its_value(bad, field):
    with pytest.raises(ValueError, match=field):
        RequestRecord.from_dict({**GOOD, **bad})


def test_unknown_and_missing_fields_are_named():
    with pytest.raises(ValueError, match="unknown field.*colour"):
        RequestRecord.from_dict({**GOOD, "colour": "red"})
    with pytest.raises(ValueError, match="missing field.*pipeline"):
        RequestRecord.from_dict({k: v for k, v in GOOD.items() if k != "pipeline"})
