"""`build_report`: the figures the inputs allow, one self-contained HTML page, clear notes."""

from __future__ import annotations

import re
import shutil

import pytest

from placer.errors import InputError
from placer.report import build_report
from tests.placer.service.dashboard.support import artifact

EXTERNAL = re.compile(r"""(?:src|href|xlink:href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def assert_self_contained(html: str) -> None:
    assert not EXTERNAL.search(html), EXTERNAL.search(html).group(0)
    assert "<script" not in html.lower()
    assert not re.search(r"<link\b", html, re.IGNORECASE)
    assert "@import" not in html and "url(http" not in html


def test_a_plan_alone_gives_the_diagram_and_tables_and_says_what_is_missing(tmp_path, micro_plan):
    report = build_report(micro_plan, tmp_path / "out")
    assert [p.name for p in report.files] == ["report.html", "plan-diagram.png", "plan-diagram.svg"]
    assert (tmp_path / "out" / "plan-diagram.png").stat().st_size > 20_000
    html = report.html_path.read_text()
    assert_self_contained(html)
    assert any("--scenario" in n for n in report.notes) and "--scenario" in html
    assert "<svg" in html and 'id="pool-P-dc-a-H100-SXM-tp1"' in html
    for b in micro_plan.binding:
        assert b.constraint in html and b.marginal.replace("+", "") in html.replace("+", "")
    for r in micro_plan.routes:
        assert f"<td>{r.request_class}</td><td>{r.pipeline}</td>" in html


def test_with_scenario_and_sweep_every_figure_is_drawn_and_inlined(full_report):
    stems = sorted({p.stem for p in full_report.files if p.suffix == ".png"})
    assert stems == ["baselines", "bathtub", "cost-goodput", "plan-diagram", "pool-utilisation", "timeline", "tpot-cdf",
                     "ttft-cdf"]
    for path in full_report.files[1:]:
        assert path.stat().st_size > (12_000 if path.suffix == ".png" else 5_000), path
    svgs = {p.stem: p.read_text() for p in full_report.files if p.suffix == ".svg"}
    assert "time to first token (s)" in svgs["ttft-cdf"] and "naive cross-DC PD" in svgs["ttft-cdf"]
    # the PrfaaS baseline is simulated too (or the page says why it has no curve)
    assert "PrfaaS (remote prefill)" in svgs["ttft-cdf"] or any("no prfaas curve" in n for n in full_report.notes)
    assert "same-DC" in svgs["baselines"] and "SLA requests per USD" in svgs["baselines"]
    assert "RLD share of" in svgs["timeline"] and "WAN Gbit/s" in svgs["timeline"]
    assert "mean prefix hit rate (%)" in svgs["bathtub"]
    html = full_report.html_path.read_text()
    assert_self_contained(html)
    assert html.count("data:image/png;base64,") == 7
    assert "simulated" in html and "hetero-same-dc-pd" in html
    assert not any("--scenario" in n or "--sweep" in n for n in full_report.notes)
    dest = artifact("report", "micro", "report.html").parent
    for path in full_report.files:
        shutil.copy(path, dest / path.name)


def test_a_scenario_the_plan_does_not_fit_is_refused_before_any_solve(tmp_path, micro_plan, micro_scenario):
    plan = micro_plan.model_copy(update={"pools": [p.model_copy(update={"datacenter": "dc-z"})
                                                   for p in micro_plan.pools]})
    with pytest.raises(InputError, match="--scenario: .*'dc-z'"):
        build_report(plan, tmp_path, micro_scenario)
    chip = micro_plan.model_copy(update={"pools": [p.model_copy(update={"chip": "TPU-v9"}) for p in micro_plan.pools]})
    with pytest.raises(InputError, match="--scenario: .*'TPU-v9'"):
        build_report(chip, tmp_path, micro_scenario)


def test_an_unwritable_out_dir_is_an_input_error(tmp_path, micro_plan):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="--out: cannot create"):
        build_report(micro_plan, blocker / "sub")


def _baseline_cells(html: str, name: str) -> list[str]:
    table = html[html.index('id="baselines-table"'):]
    row = re.search(rf"<tr><td>{re.escape(name)}</td>(.*?)</tr>", table).group(1)
    return re.findall(r"<td[^>]*>(.*?)</td>", row)


def test_every_p90_says_where_it_comes_from_and_the_cdf_agrees_with_the_table(full_report, micro_plan):
    html = full_report.html_path.read_text()
    served, _, _, _, planned_p90, simulated_p90, *_ = _baseline_cells(html, "pdd")
    assert "TTFT P90 s, planned" in html and "TTFT P90 s, simulated" in html
    assert float(planned_p90) == pytest.approx(micro_plan.metrics.ttft_p90_s, abs=1e-3)
    legend = (full_report.html_path.parent / "ttft-cdf.svg").read_text()
    assert "simulated P50" in legend and f"P90 {float(simulated_p90):.2f} s" in legend
    assert served == f"{micro_plan.metrics.served_rps:.2f} / {micro_plan.metrics.offered_rps:g}"
    assert re.search(r'id="headline"><strong>within the inventory: PDD serves \d+\.\d\d / [\d.]+ req/s at BCR', html)
    assert re.search(r"<li>at (un)?equal load.*BCR [+-]\d+\.\d % against ", html)


def test_the_report_says_why_the_plan_looks_so(full_report, micro_plan):
    html = full_report.html_path.read_text()
    why = html[html.index('id="why"'):html.index('id="binding"')]
    assert "P-MD" in why and ("RLD unused" in why or "P-RLD-MD carries" in why)
    assert "KV GiB used / capacity" in html and "largest marginal first" in html
    svgs = {p.stem: p.read_text() for p in full_report.files if p.suffix == ".svg"}
    assert "time per output token (ms)" in svgs["tpot-cdf"] and "SLA: TPOT" in svgs["tpot-cdf"]
    assert "Pool utilisation" in svgs["pool-utilisation"] and "KV memory" in svgs["pool-utilisation"]
    assert "hardware cost (USD/h)" in svgs["cost-goodput"] and "offered" in svgs["cost-goodput"]
