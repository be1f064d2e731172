"""bench/served_forwards.py's deployed profile: the planner's chip as a deployment's instances got it (issue 48)."""

from __future__ import annotations

import pytest

from bench import served_forwards
from tests.support import LinearTable


def test_the_deployed_pace_is_every_forwards_wall_over_the_table_whatever_ran_beside_it():
    """Lone decode steps at 1.1x the table and steps beside P's prefill at 2x: the planner, which has no
    neighbours in its laws, takes their seconds-weighted mean — the chip as D got it in that serve."""
    forwards = {  # [size, context, thread CPU s, wall s, began s, instance]
        "prefill": [[1, 100, 0.1, 0.1, 10.0 + k, "p0"] for k in range(20)],
        "decode": [[1, 500, 0.02, 0.022, 0.03 * k, "d0"] for k in range(30)]  # alone, before the prefills
        + [[1, 500, 0.02, 0.04, 10.0 + k, "d0"] for k in range(20)],  # each inside a prefill
    }
    paces = served_forwards.deployed_paces(forwards, LinearTable())
    assert paces["prefill"] == pytest.approx(1.0)
    assert paces["decode"] == pytest.approx((30 * 0.022 + 20 * 0.04) / (50 * 0.02), abs=1e-3)  # 1.46
    assert "decode" not in served_forwards.deployed_paces({"decode": forwards["decode"][:10]}, LinearTable())  # too few


def test_the_scaled_profile_multiplies_each_kinds_seconds_and_says_by_what():
    profile = {"tables": [{"engine": "torch", "prefill": {"seconds": [[1.0, 2.0]]}, "decode": {"seconds": [[0.5]]}}]}
    out = served_forwards.scaled_profile(profile, {"decode": 2.0}, "pdd's calibration serve")
    assert out["tables"][0]["decode"]["seconds"] == [[1.0]]
    assert out["tables"][0]["prefill"]["seconds"] == [[1.0, 2.0]]
    assert out["tables"][0]["engine"] == "torch; × pdd's calibration serve"
    assert profile["tables"][0]["decode"]["seconds"] == [[0.5]]  # the measured profile untouched


def test_each_instance_gets_the_chip_as_its_own_forwards_went():
    """pdd's RLD decodes beside MD's steps far more often than MD beside RLD's: one pace over both instances
    charged MD its neighbour (serve18: RLD 1.96, MD 1.52, both 1.62). Each instance's own forwards give its own."""
    forwards = {
        "prefill": [[1, 100, 0.1, 0.1, 100.0 + k, "p0"] for k in range(20)],
        "decode": [[1, 500, 0.02, 0.04, 0.05 * k, "rld0"] for k in range(20)]  # beside MD's steps: 2x
        + [[1, 500, 0.02, 0.024, 0.05 * k, "md0"] for k in range(60)],  # mostly alone: 1.2x
    }
    by_instance = served_forwards.deployed_paces_by_instance(forwards, LinearTable())
    assert by_instance["rld0"] == {"decode": pytest.approx(2.0)}
    assert by_instance["md0"] == {"decode": pytest.approx(1.2)}
    assert by_instance["p0"] == {"prefill": pytest.approx(1.0)}
    pooled = served_forwards.deployed_paces(forwards, LinearTable())["decode"]
    assert pooled == pytest.approx((20 * 0.04 + 60 * 0.024) / (80 * 0.02), abs=1e-3)  # 1.4: MD charged 17 % more


def test_a_role_profile_is_its_own_chip():
    profile = {"chip": "cpu", "tables": [{"chip": "cpu", "engine": "torch", "prefill": {"seconds": [[1.0]]},
                                          "decode": {"seconds": [[0.5]]}}]}
    out = served_forwards.scaled_profile(profile, {"decode": 1.5}, "pdd's calibration serve, md0's forwards",
                                         chip="cpu-md0")
    assert out["chip"] == out["tables"][0]["chip"] == "cpu-md0"
    assert out["tables"][0]["decode"]["seconds"] == [[0.75]]
    assert profile["chip"] == "cpu"
