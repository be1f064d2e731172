import math

import pytest

from placer.errors import InputError
from placer.problem import resolve
from placer.specs import load_scenario, parse_scenario
from tests.placer.conftest import EXAMPLES, micro_dict


def _workload(**changes):
    w = micro_dict()["workload"]
    w.update(changes)
    return w


@pytest.mark.parametrize(
    ("data", "expect"),
    [
        (micro_dict(workload=_workload(arrival_rps=-1)), r"workload\.arrival_rps.*greater than 0.*-1"),
        (micro_dict(workload=_workload(arrival_rps=math.nan)), r"arrival_rps"),
        (micro_dict(sla={"ttft_p90_s": 0, "tpot_s": 0.05}), r"sla\.ttft_p90_s.*greater than 0"),
        (micro_dict(links=[{"src": "dc-a", "dst": "dc-z", "gbit_per_s": 10, "rtt_ms": 20}]),
         r"links\[0\]\.dst: unknown datacenter 'dc-z'"),
        (micro_dict(links=[{"src": "dc-a", "dst": "dc-b", "gbit_per_s": -5, "rtt_ms": 20}]),
         r"links\.0\.gbit_per_s.*-5"),
        (micro_dict(datacenters=[{"name": "dc-a", "inventory": {}}], links=[]), r"inventory is empty"),
        (micro_dict(datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": -2}}], links=[]),
         r"inventory\.H100-SXM.*greater than or equal to 0 \(got -2\)"),
        (micro_dict(options={"tp_degrees": [0]}), r"tp_degrees\.0.*greater than or equal to 1 \(got 0\)"),
        (micro_dict(bogus=1), r"bogus.*Extra inputs"),
    ],
)
def test_bad_scenarios_name_the_field_and_value(data, expect):
    with pytest.raises(InputError, match=expect):
        parse_scenario(data)


def test_shares_must_sum_to_one():
    data = micro_dict()
    data["workload"]["classes"][0]["share"] = 0.5
    with pytest.raises(InputError, match=r"shares must sum to 1, got 0.7"):
        parse_scenario(data)


def test_unknown_chip_in_inventory_lists_known_chips():
    data = micro_dict()
    data["datacenters"][0]["inventory"] = {"H9000": 8}
    with pytest.raises(InputError, match=r"datacenters\[0\]\.inventory: unknown chip 'H9000'; known chips: .*H20"):
        resolve(parse_scenario(data))


def test_unknown_model_lists_known_models():
    with pytest.raises(InputError, match=r"unknown model 'gpt-7'; known models: .*deepseek-v3.2"):
        resolve(parse_scenario(micro_dict(model="gpt-7")))


def test_inline_model_config_is_accepted():
    model = {"name": "tiny", "attn": "gqa", "layers": 4, "hidden": 512, "q_heads": 8, "kv_heads": 2,
             "head_dim": 64, "params_total_b": 0.1, "params_active_b": 0.1}
    problem = resolve(parse_scenario(micro_dict(model=model)))
    assert problem.kv_bytes_per_token == 4 * 2 * 2 * 64 * 2


def test_missing_and_malformed_files_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="cannot read scenario file"):
        load_scenario(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed")
    with pytest.raises(InputError, match="not valid YAML"):
        load_scenario(bad)


@pytest.mark.parametrize("name", ["pdd-two-dc.yaml", "eight-dc.yaml"])
def test_bundled_examples_load(name):
    problem = resolve(load_scenario(EXAMPLES / name))
    assert sum(c.share for c in problem.classes) == pytest.approx(1.0)
