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
