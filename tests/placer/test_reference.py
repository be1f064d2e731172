from pathlib import Path

from placer.reference import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "scenario.md"


def test_scenario_reference_is_up_to_date():
    assert DOC.read_text() == render(), "regenerate with: python -m placer.reference > docs/scenario.md"


def test_every_option_is_documented():
    text = render()
    for word in ("min_served_fraction", "utilization_cap", "tp_degrees", "ttft_p90_s", "hit_rate"):
        assert f"`{word}`" in text
