"""YAML files are parsed by libyaml where PyYAML has it (placer/readers.py): a 780-line scenario
in ~0.4 s rather than ~2 s, which counts against `optimize --time-limit`. The fast parser must
change no data, and a file it rejects must still be named with the offending line shown."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from placer.errors import InputError
from placer.readers import _FastStrictLoader, _StrictLoader, load_data

EXAMPLES = sorted((Path(__file__).parents[3] / "examples").glob("*.yaml"))


def test_libyaml_is_the_parser_here():
    assert yaml.__with_libyaml__ and issubclass(_FastStrictLoader, yaml.CSafeLoader)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_fast_parser_reads_every_example_as_pyyaml_does(path):
    text = path.read_text()
    assert yaml.load(text, Loader=_FastStrictLoader) == yaml.load(text, Loader=_StrictLoader)  # noqa: S506


def test_a_malformed_file_is_named_with_its_line_shown(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: ok\nclasses: [chat, code\n")
    with pytest.raises(InputError) as raised:
        load_data(path, "scenario")
    message = str(raised.value)
    assert "bad.yaml" in message and "is not valid YAML" in message
    assert "classes: [chat, code" in message and "^" in message  # PyYAML's own message quotes the line


def test_a_key_given_twice_is_still_refused_with_both_lines(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("name: a\nsla:\n  ttft_p90_s: 2\n  ttft_p90_s: 3\n")
    with pytest.raises(InputError, match=r"(?s)duplicate key 'ttft_p90_s' \(first at line 3\).*line 4"):
        load_data(path, "scenario")
