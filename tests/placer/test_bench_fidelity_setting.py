"""How bench/bench_fidelity.py reads a published setting (issue 13): one rule per field, the same for
every row of bench/data/published_measurements.csv."""

import csv

import pytest

from bench.bench_fidelity import CSV, query


def _row(row_id: str) -> dict:
    with open(CSV, newline="") as fh:
        return next(r for r in csv.DictReader(fh) if r["id"] == row_id)


def test_a_per_rank_batch_and_forward_budget_scale_with_the_data_parallel_ranks():
    """TensorRT-LLM's DeepSeek-R1 guide: '--max_batch_size: Max batch size in each rank', and each
    attention-DP rank schedules its own forward of at most max_num_tokens."""
    q = query(_row("trtllm-blog-h200-dsr1-dep8-1024-2048"))
    assert (q["tp"], q["batch"], q["chunk_tokens"]) == (8, 128 * 8, 1151 * 8)


def test_superseded_engine_versions_stay_in_the_table_but_not_among_the_fair_points():
    """The 2023 TensorRT-LLM rows are judged against the same page's v0.9.0 revision (same chip, model
    and lengths); each names the row that replaces it, and that row is fair."""
    with open(CSV, newline="") as fh:
        rows = {r["id"]: r for r in csv.DictReader(fh)}
    old = [r for r in rows.values() if r["notes"].startswith("SUPERSEDED")]
    assert len(old) == 10
    for r in old:
        assert r["fair"] == "no"
        new = r["notes"].split("row ", 1)[1].split(".", 1)[0]
        assert rows[new]["fair"] == "yes" and rows[new]["model"] == r["model"] and rows[new]["chip"] == r["chip"]
        assert rows[new]["metric"] == r["metric"] and rows[new]["input_tokens"] == r["input_tokens"]


def test_the_fair_points_meet_issue_13s_median_target():
    """Issue 13: median |ln(predicted / published)| over the fair rows within a factor 1.15, on the rows
    that issue judged (the roofline; the rows issue 41 added from AIConfigurator's measured sample, ids
    ``aic-…``, are judged below with their engines). The worst rows (DeepSeek-R1 on 8 x H200 with
    attention DP x EP8 in TensorRT-LLM, 1.5-2.9x) lie beyond even the model's terms with nothing
    overlapped and no prompt co-scheduled (bench_fidelity.py --explain; the rows' notes), so the worst
    target (1.5) is held for the dense-model rows only."""
    from bench.bench_fidelity import evaluate, summary

    rows, _ = evaluate()
    fair = [r for r in rows if r["fair"] and not r["id"].startswith("aic-")]
    assert len(fair) >= 15 and summary(fair)["median_factor"] <= 1.15
    dense = [r for r in fair if not r["model"].startswith("deepseek")]
    assert all(1 / 1.5 <= r["ratio"] <= 1.5 for r in dense), [(r["id"], round(r["ratio"], 2)) for r in dense]


def test_each_row_with_its_engines_measured_kernels_meets_issue_41s_median():
    """Issue 41: every fair row predicted with the measured kernels of the engine that served it (the
    shipped tables; the rows are the exam, never an input) — median factor ≤ 1.10 (measured 1.09 when the
    tables shipped: deterministic, no tolerance needed beyond that), and every fair dense-model row within
    1.5x (the worst, DeepSeek-R1 on B200 DEP4 at 0.63, is MoE: bench_fidelity.py's summary names it)."""
    import math

    from bench.bench_fidelity import evaluate

    rows, _ = evaluate()
    fair = [r for r in rows if r["fair"] and r["engine_ratio"]]
    logs = sorted(abs(math.log(r["engine_ratio"])) for r in fair)
    assert len(fair) >= 40 and math.exp(logs[len(logs) // 2]) <= 1.10
    dense = [r for r in fair if not r["model"].startswith(("deepseek", "kimi", "qwen3-235b"))]
    assert dense and all(1 / 1.5 <= r["engine_ratio"] <= 1.5 for r in dense), \
        [(r["id"], round(r["engine_ratio"], 2)) for r in dense]


def test_the_throughput_budget_adds_up_to_the_prediction_and_bounds_it():
    """bench_fidelity --explain: the model's prefill + decode time per request gives the predicted figure
    (O / (time × chips)); the step with nothing overlapped is the sum of every kernel's compute and memory
    time plus communication and overhead; a prompt never co-scheduled across the N data-parallel ranks
    costs I/P × ((1 − s)·N + s), and a dense tensor-parallel instance has no such bound (N = 1)."""
    from bench.bench_fidelity import predict, throughput_budget
    from placer.perfmodel import DECODE_STEP_OVERHEAD_S, KERNEL_KINDS

    row = _row("trtllm11-h200-dsr1-dep8-1000-1000")
    b = throughput_budget(row)
    assert b["predicted"] == pytest.approx(predict(row)[0], rel=1e-9)
    assert b["published_s"] == pytest.approx(1000 / (float(row["value"]) * 8))
    k = b["kernels"]
    serial = sum(k[kind][0] + k[kind][1] for kind in KERNEL_KINDS) + k["communication"] + DECODE_STEP_OVERHEAD_S
    assert b["serial_step_s"] == pytest.approx(serial) and serial > b["step_s"]
    assert 0 < b["expert_share"] < 1 and b["ranks"] == 8
    s = b["expert_share"]
    assert b["lockstep_prefill_s"] == pytest.approx(b["prefill_s"] * ((1 - s) * 8 + s))
    assert b["model_s"] < b["bound_s"]
    dense = throughput_budget(_row("trtllm11-h200-l33-70b-tp2-1000-1000"))
    assert dense["ranks"] == 1 and dense["lockstep_prefill_s"] == pytest.approx(dense["prefill_s"])
