"""Reading JSONL traces, and prefix hits from Mooncake-style block hashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placer.errors import InputError
from placer.workload import read_trace, with_hit_rates

MOONCAKE = Path(__file__).resolve().parents[2] / "data" / "mooncake_conversation_2000.jsonl"


def _write(tmp_path: Path, rows: list) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_records_carry_seconds_lengths_and_hits(tmp_path):
    path = _write(tmp_path, [{"timestamp": 1500, "input_length": 1000, "output_length": 20, "hit_rate": 0.5}, "",
                             {"timestamp": 2500, "input_length": 2000, "output_length": 0, "hash_ids": [1, 2]}])
    a, b = list(read_trace(path))
    assert (a.timestamp_s, a.input_tokens, a.output_tokens, a.hit_rate) == (1.5, 1000, 20, 0.5)
    assert b.hash_ids == (1, 2) and b.hit_rate is None and b.output_tokens == 1


def test_hits_follow_from_blocks_seen_before(tmp_path):
    path = _write(tmp_path, [
        {"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 1, "input_length": 1536, "output_length": 5, "hash_ids": [1, 2, 3]},
        {"timestamp": 2, "input_length": 1536, "output_length": 5, "hash_ids": [1, 9, 3]},
        {"timestamp": 3, "input_length": 1200, "output_length": 5, "hash_ids": [1, 2, 3]},
    ])
    hits = [r.hit_rate for r in with_hit_rates(read_trace(path))]
    assert hits == pytest.approx([0.0, 1024 / 1536, 512 / 1536, 1.0])


@pytest.mark.parametrize(("row", "words"), [
    ('{"timestamp": 0, "input_length": 10}', "line 1: missing field 'output_length'"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2}', "needs 'hit_rate' or 'hash_ids'"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2, "hit_rate": 1.5}', "hit_rate must be in [0, 1]"),
    ('{"timestamp": 0, "input_length": "x", "output_length": 2, "hit_rate": 0}', "'input_length' must be a number"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 2, "hit_rate": 0}', "input_length must be > 0"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": ["a"]}', "hash_ids must be a list"),
    ("not json", "line 1 is not valid JSON"),
])
def test_a_bad_line_is_named_with_its_field(tmp_path, row, words):
    with pytest.raises(InputError) as err:
        list(read_trace(_write(tmp_path, [row])))
    assert words in str(err.value)


def test_missing_trace_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read trace file"):
        list(read_trace(tmp_path / "none.jsonl"))


def test_the_mooncake_slice_is_a_chat_workload_with_modest_prefix_reuse():
    records = list(with_hit_rates(read_trace(MOONCAKE)))
    assert len(records) == 2000
    mean_hit = sum(r.hit_rate for r in records) / len(records)
    assert 0.25 < mean_hit < 0.5  # far below the ~0.9 of agentic traffic
    assert all(r.hash_ids[0] == 0 for r in records)  # one shared system-prompt block
    assert records[-1].timestamp_s > records[0].timestamp_s
