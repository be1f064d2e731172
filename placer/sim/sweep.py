"""Parameter sweeps: many scenario variants optimised and simulated in parallel on Ray.

in:  a Scenario, what to vary (``hit-mean``, ``link-gbit``, ``price``, ``load``) and the values
out: one row per value — the ILP's and the simulator's BCR, goodput and P90 TTFT, cost,
     RLD token share, the plan's pools (``pools``: ``role dc chip tpN xK`` joined by ``; ``,
     ``chips``, ``plan_changed``: 1 where the pools differ from the previous value's) and
     what was varied (``varied``: ``price of GPU-B``) — written as CSV and drawn as PNG
     (:func:`write_outputs`): variants without a plan are drawn as marked points, the plan
     changes as vertical lines, hit-rate axes kept within [0, 1].

Each variant is one Ray task (a local Ray by default, a cluster when an address is
given); ``use_ray=False`` runs them in this process. Ray and matplotlib are imported
only inside the functions that need them.

* ``hit-mean``: every class's miss rate (1 − hit) is scaled by one factor so that the
  share-weighted mean hit equals the value (clipped to [0, 1]).
* ``link-gbit``: every WAN line's Gbit/s. ``load``: the arrival rate.
* ``price``: the price per chip-hour of one chip (``chip``; by default the first chip the
  scenario overrides, else the first chip of its last datacenter).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from placer.errors import InputError
from placer.specs import ChipSpec, Scenario

VARY = ("hit-mean", "link-gbit", "price", "load")
COLUMNS = ("value", "status", "ilp_bcr_requests_per_usd", "sim_bcr_requests_per_usd", "ilp_goodput_rps",
           "sim_goodput_rps", "ilp_ttft_p90_s", "sim_ttft_p90_s", "sim_ttft_p99_s", "cost_usd_per_h",
           "ilp_rld_token_share", "sim_rld_token_share", "mean_hit_rate", "mean_new_tokens", "varied", "pools",
           "chips", "plan_changed", "error")
TEXT_COLUMNS = ("status", "varied", "pools", "error")
LABELS = {"hit-mean": "mean prefix hit rate", "link-gbit": "WAN line (Gbit/s)", "load": "offered load (req/s)"}


def varied_label(vary: str, scenario: Scenario | None = None, chip: str | None = None) -> str:
    """What a sweep varies, in words: ``price of GPU-B (USD per chip-hour)`` names the chip."""
    if vary == "price":
        name = chip or (default_price_chip(scenario) if scenario is not None else "the chip")
        return f"price of {name} (USD per chip-hour)"
    return LABELS.get(vary, vary)


def default_price_chip(scenario: Scenario) -> str:
    if scenario.chips:
        return scenario.chips[0].name
    for dc in reversed(scenario.datacenters):
        if dc.inventory:
            return sorted(dc.inventory)[0]
    raise InputError("scenario has no chips to vary the price of")


def _scaled_hits(classes: list, f: float) -> list[float]:
    """Each class's hit with its miss rate scaled by ``f`` (clamped to [0, 1])."""
    return [min(1.0, max(0.0, 1.0 - f * (1.0 - c.hit_rate))) for c in classes]


def _mean_hit(classes: list, f: float) -> float:
    return sum(c.share * h for c, h in zip(classes, _scaled_hits(classes, f)))


def _hit_mean(scenario: Scenario, target: float) -> Scenario:
    """The scenario with every class's miss rate scaled alike so that the mean hit is ``target``."""
    if not 0.0 <= target <= 1.0:
        raise InputError(f"hit-mean values must be in [0, 1], got {target}")
    classes = scenario.workload.classes
    if not classes:
        raise InputError("--vary hit-mean needs a scenario with workload.classes")
    lo, hi = 0.0, 1.0
    while _mean_hit(classes, hi) > target and hi < 1e9:
        hi *= 2
    if _mean_hit(classes, 0.0) < target:  # every class already at hit 1 cannot rise further
        f = 0.0
    else:
        for _ in range(100):
            mid = (lo + hi) / 2
            if _mean_hit(classes, mid) > target:
                lo = mid
            else:
                hi = mid
        f = (lo + hi) / 2
    new = [c.model_copy(update={"hit_rate": round(h, 6)}) for c, h in zip(classes, _scaled_hits(classes, f))]
    return scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"classes": new})})


def variant(scenario: Scenario, vary: str, value: float, chip: str | None = None) -> Scenario:
    """``scenario`` with one quantity set to ``value``."""
    if not math.isfinite(value):
        raise InputError(f"sweep value must be a finite number, got {value}")
    if vary == "hit-mean":
        return _hit_mean(scenario, value)
    if vary == "link-gbit":
        if value < 0:
            raise InputError(f"link-gbit values must be >= 0, got {value}")
        if not scenario.links:
            raise InputError("--vary link-gbit needs a scenario with links")
        return scenario.model_copy(update={"links": [l.model_copy(update={"gbit_per_s": value})
                                                     for l in scenario.links]})
    if vary == "load":
        if value <= 0:
            raise InputError(f"load values must be > 0 req/s, got {value}")
        return scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"arrival_rps": value})})
    if vary == "price":
        if value <= 0:
            raise InputError(f"price values must be > 0 USD per chip-hour, got {value}")
        name = chip or default_price_chip(scenario)
        chips = list(scenario.chips)
        for i, c in enumerate(chips):
            if c.name == name:
                chips[i] = c.model_copy(update={"price_usd_per_h": value})
                break
        else:
            chips.append(ChipSpec(name=name, base=name, price_usd_per_h=value))
        return scenario.model_copy(update={"chips": chips})
    raise InputError(f"--vary: unknown {vary!r}; choose one of {', '.join(VARY)}")


def sweep_point(scenario_data: dict, vary: str, value: float, requests: int, seed: int, chip: str | None,
                solver: str, time_limit_s: float) -> dict:
    """Optimise and simulate one variant (runs inside a Ray task or in-process)."""
    from placer.errors import PlacerError
    from placer.optimize import SolveConfig, optimize
    from placer.problem import resolve
    from placer.sim.config import SimConfig
    from placer.sim.engine import simulate
    from placer.specs import parse_scenario

    row = {k: math.nan for k in COLUMNS}
    row.update(value=value, status="ok", error="", pools="")
    try:
        base = parse_scenario(scenario_data)
        row["varied"] = varied_label(vary, base, chip)
        scen = variant(base, vary, value, chip)
        problem = resolve(scen)
        row["mean_hit_rate"] = sum(c.share * c.hit_rate for c in problem.classes)
        row["mean_new_tokens"] = sum(c.share * max(1.0, (1 - c.hit_rate) * c.input_tokens) for c in problem.classes)
        plan = optimize(problem, SolveConfig("bcr", solver, time_limit_s, marginals=False))
        sim = simulate(problem, plan, SimConfig(requests=requests, seed=seed))
    except PlacerError as err:
        row.update(status="no plan", error=str(err))
        return row
    except Exception as err:  # one broken variant must not sink the whole sweep: report it in its row
        row.update(status="error", error=f"{type(err).__name__}: {err}")
        return row
    m = plan.metrics
    row.update(ilp_bcr_requests_per_usd=m.bcr_requests_per_usd, sim_bcr_requests_per_usd=sim["bcr_requests_per_usd"],
               ilp_goodput_rps=m.goodput_rps, sim_goodput_rps=sim["goodput_rps"], ilp_ttft_p90_s=m.ttft_p90_s,
               sim_ttft_p90_s=sim["ttft_p90_s"], sim_ttft_p99_s=sim["ttft_p99_s"], cost_usd_per_h=m.cost_usd_per_h,
               ilp_rld_token_share=m.rld_token_share, sim_rld_token_share=sim["rld_token_share"],
               pools=pools_text(plan), chips=sum(p.count * p.tp for p in plan.pools))
    return row


def pools_text(plan) -> str:
    """The plan's pools in one cell: ``P dc-a H100-SXM tp2 x3; MD dc-b H20 tp8 x1``."""
    return "; ".join(f"{p.role} {p.datacenter} {p.chip} tp{p.tp} x{p.count}"
                     for p in sorted(plan.pools, key=lambda p: (p.datacenter, p.role, p.chip, p.tp)) if p.count > 0)


def mark_changes(rows: list[dict]) -> list[dict]:
    """Set ``plan_changed`` (1/0) on each row with a plan: its pools differ from those of the
    previous row with a plan (the first such row: 0)."""
    previous = None
    for r in rows:
        if r.get("status") != "ok":
            r["plan_changed"] = math.nan
            continue
        r["plan_changed"] = int(previous is not None and r.get("pools") != previous)
        previous = r.get("pools")
    return rows


def run_sweep(scenario: Scenario, vary: str, values: list[float], requests: int = 20_000, seed: int = 0,
              chip: str | None = None, address: str | None = None, use_ray: bool = True, solver: str = "ortools",
              time_limit_s: float = 30.0) -> list[dict]:
    """One row per value, in the order given."""
    scenario.single_model("placer sweep")
    if vary not in VARY:
        raise InputError(f"--vary: unknown {vary!r}; choose one of {', '.join(VARY)}")
    if not values:
        raise InputError("--values: give at least one value")
    for v in values:  # bad values fail here, before any task starts
        variant(scenario, vary, v, chip)
    data = scenario.model_dump(mode="json", exclude_none=True)
    if not use_ray:
        return mark_changes([sweep_point(data, vary, v, requests, seed, chip, solver, time_limit_s) for v in values])
    return mark_changes(on_ray(sweep_point, [(data, vary, v, requests, seed, chip, solver, time_limit_s)
                                             for v in values], address))


def on_ray(fn, args: list[tuple], address: str | None = None) -> list:
    """``fn(*a)`` for each argument tuple as one Ray task (one CPU each), results in order; a local
    Ray is started (and shut down after) unless one is running or ``address`` names a cluster."""
    try:
        import ray
    except ImportError:
        raise InputError("ray is not installed: install placer[ray], or pass --no-ray") from None
    started = False
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        except (ConnectionError, ValueError, RuntimeError) as err:
            raise InputError(f"--address: cannot reach a Ray cluster at {address!r}: {err}") from None
        started = True
    try:
        task = ray.remote(num_cpus=1)(fn)
        return ray.get([task.remote(*a) for a in args])
    finally:
        if started:
            ray.shutdown()


def parse_values(text: str) -> list[float]:
    """``0.5,0.7,0.9`` or ``start:stop:count`` (evenly spaced, both ends included)."""
    text = text.strip()
    try:
        if ":" in text:
            start, stop, count = text.split(":")
            n = int(count)
            if n < 1:
                raise ValueError
            a, b = float(start), float(stop)
            return [a + (b - a) * i / (n - 1) for i in range(n)] if n > 1 else [a]
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--values: expected numbers like 0.5,0.7,0.9 or start:stop:count, got {text!r}") from None


def write_outputs(rows: list[dict], out_dir: str | Path, vary: str, title: str = "") -> tuple[Path, Path]:
    """``sweep.csv`` and ``sweep.png`` in ``out_dir`` (created)."""
    return write_csv_and_plot(rows, out_dir, "sweep", COLUMNS, lambda png: _plot(rows, png, vary, title))


def write_csv_and_plot(rows: list[dict], out_dir: str | Path, stem: str, columns: tuple[str, ...],
                       plot) -> tuple[Path, Path]:
    """``<stem>.csv`` (``columns``; a missing or None value as an empty cell) and ``<stem>.png``
    (drawn by ``plot(path)``) in ``out_dir``, created; an unwritable folder is an InputError."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out: cannot create {str(out)!r}: {err.strerror}") from None
    csv_path, png_path = out / f"{stem}.csv", out / f"{stem}.png"
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r.get(k, "") for k in columns})
    plot(png_path)
    return csv_path, png_path


def _plot(rows: list[dict], path: Path, vary: str, title: str) -> None:
    import matplotlib.pyplot as plt

    fig = sweep_figure(rows, vary, title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sweep_figure(rows: list[dict], vary: str, title: str = ""):
    """The sweep's figure: BCR (and, for hit-mean, prefilled tokens per USD) and TTFT against
    the varied value; variants without a plan marked x at zero, plan changes as dotted lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.get("status") == "ok"]
    xs = [r["value"] for r in ok]
    per_token = vary == "hit-mean" and bool(ok) and all(r.get("mean_new_tokens") for r in ok)
    fig, axes = plt.subplots(3 if per_token else 2, 1, figsize=(7, 10 if per_token else 7), sharex=True)
    ax1, ax2 = axes[0], axes[-1]
    ax1.plot(xs, [r["ilp_bcr_requests_per_usd"] for r in ok], "o--", label="ILP")
    ax1.plot(xs, [r["sim_bcr_requests_per_usd"] for r in ok], "s-", label="simulated")
    failed = [r["value"] for r in rows if r.get("status") != "ok"]
    if failed:
        for ax in axes:
            ax.plot(failed, [0] * len(failed), "x", color="#c0392b", ms=9, mew=2, clip_on=False,
                    label="no plan" if ax is ax1 else None)
    for r in ok:
        if r.get("plan_changed") == 1:
            for ax in axes:
                ax.axvline(r["value"], color="#999999", ls=":", lw=1)
    if any(r.get("plan_changed") == 1 for r in ok):
        ax1.plot([], [], ls=":", color="#999999", label="the plan's pools change")
    ax1.set_ylabel("BCR (SLA requests per USD)")
    ax1.set_ylim(bottom=0)
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3)
    if per_token:  # prefill efficiency: flat but for the dips where a small tail chunk starts
        ax = axes[1]
        ax.plot(xs, [r["sim_bcr_requests_per_usd"] * r["mean_new_tokens"] for r in ok], "s-", color="C2",
                label="simulated")
        ax.set_ylabel("prefilled tokens per USD\n(BCR × new tokens per request)")
        ax.legend()
        ax.grid(alpha=0.3)
    ax2.plot(xs, [r["ilp_ttft_p90_s"] for r in ok], "o--", label="ILP P90")
    ax2.plot(xs, [r["sim_ttft_p90_s"] for r in ok], "s-", label="simulated P90")
    ax2.plot(xs, [r["sim_ttft_p99_s"] for r in ok], "^:", label="simulated P99")
    ax2.set_ylabel("TTFT (s)")
    ax2.set_ylim(bottom=0)
    named = next((r["varied"] for r in rows if isinstance(r.get("varied"), str) and r["varied"]), None)
    ax2.set_xlabel(named or LABELS.get(vary, vary))
    if vary == "hit-mean":  # a hit rate lives in [0, 1]: never let the margins run past it
        lo, hi = min(r["value"] for r in rows), max(r["value"] for r in rows)
        pad = max(0.02, 0.05 * (hi - lo))
        ax2.set_xlim(max(0.0, lo - pad), min(1.0, hi + pad))
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(title or f"sweep over {vary}")
    fig.tight_layout()
    return fig
