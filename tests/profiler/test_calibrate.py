"""Calibration: measured profiles feed the planner, and a slower chip changes the plan."""

from __future__ import annotations

import json

import pytest

from placer.catalog import DEFAULT_INTERCONNECT_EFFICIENCY
from placer.errors import InputError
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.specs import parse_scenario
from placer.profiles import RooflineExceededError
from placer.profiles.records import ChipProfile
from placer.profiles.records import measured_from
from tests.placer.conftest import micro_dict
from tests.profiler.conftest import synthetic_profile, write_profile

# Four H100s cannot carry the micro workload alone: with the datasheet, two L40S
# instances (tp2) in dc-b take part of MainDecode.
SCENARIO = micro_dict(datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 4}},
                                   {"name": "dc-b", "inventory": {"L40S": 16}}])


def chips_used(plan, chip: str) -> int:
    return sum(p.count * p.tp for p in plan.pools if p.chip == chip)


def test_a_profile_file_gives_the_measured_efficiencies_with_provenance(tmp_path):
    path = write_profile(tmp_path / "l40s.json", synthetic_profile("L40S", 0.55, 0.6))
    measured = measured_from(path)
    assert set(measured) == {"L40S"}
    fields = measured["L40S"]
    assert fields["compute_efficiency"] == 0.55 and fields["mem_bw_efficiency"] == 0.6
    assert "interconnect_efficiency" not in fields  # not measured: the catalog default stays
    assert "l40s.json" in fields["profile"] and "gpu-node-7" in fields["profile"]
    chip = resolve(parse_scenario(SCENARIO), measured).chips["L40S"]
    assert chip.mem_bw_efficiency == 0.6 and chip.interconnect_efficiency == DEFAULT_INTERCONNECT_EFFICIENCY
    assert chip.profile == fields["profile"]


def test_a_directory_gives_the_newest_profile_per_chip_and_skips_other_json(tmp_path):
    write_profile(tmp_path / "old.json", synthetic_profile("L40S", 0.5, 0.5, "2026-10-01T00:00:00+00:00"))
    write_profile(tmp_path / "new.json", synthetic_profile("L40S", 0.6, 0.7, "2026-11-01T00:00:00+00:00"))
    write_profile(tmp_path / "h100.json", synthetic_profile("H100-SXM", 0.8, 0.9))
    (tmp_path / "link.json").write_text(json.dumps({"kind": "link"}))
    (tmp_path / "notes.json").write_text("[1, 2]")
    measured = measured_from(tmp_path)
    assert set(measured) == {"L40S", "H100-SXM"}
    assert measured["L40S"]["mem_bw_efficiency"] == 0.7 and "new.json" in measured["L40S"]["profile"]
    assert set(measured_from(tmp_path, chips=["H100-SXM"])) == {"H100-SXM"}


def test_bad_sources_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="neither"):
        measured_from(tmp_path / "missing.json")
    bad = synthetic_profile("L40S", 0.5, 0.5)
    del bad["provenance"]["host"]
    with pytest.raises(InputError, match="provenance.host"):
        measured_from(write_profile(tmp_path / "bad.json", bad))


def test_a_stored_profile_above_the_roofline_is_refused(tmp_path):
    profile = synthetic_profile("L40S", 0.5, 0.5)
    profile["measurements"][1]["samples"][0] = 0.9e12  # L40S datasheet: 0.864 TB/s
    with pytest.raises(RooflineExceededError, match="L40S"):
        measured_from(write_profile(tmp_path / "fast.json", profile))


def test_latest_reads_the_newest_profile_per_chip_from_the_database(tmp_path):
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("alembic")
    from profiler.calibrate import store

    url = f"sqlite:///{tmp_path / 'placer.db'}"
    store(ChipProfile.model_validate(synthetic_profile("L40S", 0.5, 0.5, "2026-10-01T00:00:00+00:00")), url)
    row = store(ChipProfile.model_validate(synthetic_profile("L40S", 0.6, 0.4, "2026-11-01T00:00:00+00:00")), url)
    from placer.service.profiles import latest_measured

    measured = measured_from("latest", latest=lambda chips: latest_measured(chips, url))
    assert measured["L40S"]["mem_bw_efficiency"] == 0.4 and measured["L40S"]["compute_efficiency"] == 0.6
    assert f"profile {row}" in measured["L40S"]["profile"]


@pytest.mark.parametrize("mem_bw_efficiency", [0.6, 0.4])
def test_a_slower_measured_chip_gets_more_instances(tmp_path, mem_bw_efficiency):
    """Measured at less than the default 80 % of its bandwidth, the L40S decodes slower:
    the plan needs more of them for the same MainDecode work, and BCR falls."""
    scenario = parse_scenario(SCENARIO)
    datasheet = optimize(scenario, SolveConfig(marginals=False, time_limit_s=20))
    path = write_profile(tmp_path / "l40s.json", synthetic_profile("L40S", 0.55, mem_bw_efficiency))
    calibrated = optimize(scenario, SolveConfig(marginals=False, time_limit_s=20), measured=measured_from(path))
    assert chips_used(datasheet, "L40S") > 0
    assert chips_used(calibrated, "L40S") > chips_used(datasheet, "L40S")
    assert calibrated.metrics.bcr_requests_per_usd < datasheet.metrics.bcr_requests_per_usd
    assert any(n.startswith("calibrated with L40S: profile l40s.json") for n in calibrated.notes)


def test_a_chip_measured_too_slow_to_pay_is_dropped(tmp_path):
    """At 4 req/s the datasheet plan decodes some traffic on two L40S; measured at half
    its datasheet rates, an L40S is no longer worth its price and an H100 takes its work."""
    workload = {**SCENARIO["workload"], "arrival_rps": 4.0}
    scenario = parse_scenario({**SCENARIO, "workload": workload})
    datasheet = optimize(scenario, SolveConfig(marginals=False, time_limit_s=20))
    measured = measured_from(write_profile(tmp_path / "l40s.json", synthetic_profile("L40S", 0.5, 0.5)))
    calibrated = optimize(scenario, SolveConfig(marginals=False, time_limit_s=20), measured=measured)
    assert chips_used(datasheet, "L40S") > 0
    assert chips_used(calibrated, "L40S") == 0
    assert chips_used(calibrated, "H100-SXM") > chips_used(datasheet, "H100-SXM")
    assert calibrated.metrics.bcr_requests_per_usd < datasheet.metrics.bcr_requests_per_usd


def test_latest_is_read_by_the_loader_the_caller_passes():
    """The planner's reader never touches a database: 'latest' goes to the injected loader."""
    from placer.profiles import records

    asked = []

    def loader(chips):
        asked.append(chips)
        return {"L40S": {"mem_bw_efficiency": 0.5, "profile": "profile 7"}}

    assert records.measured_from("latest", chips=["L40S"], latest=loader)["L40S"]["mem_bw_efficiency"] == 0.5
    assert asked == [{"L40S"}]
    with pytest.raises(InputError, match="--profiles latest"):
        records.measured_from("latest")
