"""CLI commands of the profiler: ``placer profile chip``, ``placer profile link`` and ``placer profile model``.

``profile`` is a ``typer.Typer`` that placer's command registry mounts as the
``profile`` group (through :mod:`profiler.commands`), importing this module only when
a ``profile`` command runs; torch is imported by the measurement itself. Exit codes
as the rest of ``placer`` (docs/contracts.md): 0 success, 2 bad input, 1 anything
else (a figure above its roofline included); a user's mistake is one line on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from placer.cli.fold import Fold  # a face helper: tables that fold on narrow terminals
from placer.errors import InputError, PlacerError
from placer.profiles.records import ChipProfile, LinkProfile
from placer.profiles.store import keep
from profiler import link
from profiler.calibrate import store
from profiler.commands import PROFILE
from profiler.run import profile_chip

profile = typer.Typer(help=PROFILE[1], no_args_is_help=True)
out = Console()
err = Console(stderr=True)


def _fail(error: Exception) -> NoReturn:
    """One line on stderr naming the error (markup-escaped), then its exit code."""
    err.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False, soft_wrap=True)
    raise typer.Exit(getattr(error, "exit_code", 1))


def _progress(json_out: bool) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                    TimeElapsedColumn(), console=err, transient=True, disable=json_out)


def _si(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "flop_per_s":
        return f"{value / 1e12:.2f} TFLOP/s" if value >= 1e11 else f"{value / 1e9:.1f} GFLOP/s"
    if unit == "bytes_per_s":
        return f"{value / 1e9:.1f} GB/s"
    return f"{value / (1 << 30):.2f} GiB"


def chip_view(record: ChipProfile) -> Group:
    """The measurements of a chip profile as a table (folded to one block per measurement on a
    narrow terminal: `placer.cli.fold`), efficiencies below it."""
    p = record.provenance
    title = (f"{record.chip}: {p.device_model} on {p.host}, {p.measured_at:%Y-%m-%d %H:%M}Z "
             f"(torch {p.torch_version}, triton {p.triton_version or '-'}, driver {p.driver})")
    rows = []
    for m in record.measurements:
        frac = m.fraction_of_roofline
        rows.append([m.dimension, m.name, _si(m.median, m.unit), f"{m.spread_rel:.1%}",
                     "-" if frac is None else f"{frac:.1%}", str(len(m.samples))])
    table = Fold(title, ["dimension", "what", "median", "spread", "of roofline", "runs"], rows,
                 right=["median", "spread", "of roofline", "runs"])
    eff = record.efficiency
    caption = (
        f"efficiency (measured / {'datasheet' if record.rooflines.datasheet else 'estimated bound'}): "
        + ", ".join(f"{k} {v:.3f}" if v is not None else f"{k} not measured"
                    for k, v in (("compute", eff.compute_efficiency), ("memory bw", eff.mem_bw_efficiency),
                                 ("interconnect", eff.interconnect_efficiency)))
    )
    return Group(table, Text(caption, style="dim"))


@profile.command("chip")
def chip_command(
    device: Annotated[str, typer.Option(help="torch device to profile: cpu, cuda or cuda:N.")] = "cpu",
    chip: Annotated[str | None, typer.Option(
        help="Catalog chip whose datasheet bounds the figures and that the profile calibrates "
             "(default: from the CUDA device name; 'cpu' with estimated bounds on the CPU).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Smaller shapes and fewer runs (CI: under a minute).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the profile JSON instead of a table (with --out: "
                                           "write it there and say where).")] = False,
    out_path: Annotated[Path | None, typer.Option("--out", help="Also write the profile JSON here.")] = None,
    store_db: Annotated[bool, typer.Option("--store", help="Also store it in the database (chip_profiles).")] = False,
) -> None:
    """Measure compute, memory bandwidth and capacity, and interconnect of one device.

    Every result is also kept under the user data dir (the line "kept as …" names the file), where
    ``--profiles latest`` finds it.
    """
    try:
        with _progress(json_out) as progress:
            task = progress.add_task("profile", total=4)

            def step(label: str, done: int, total: int) -> None:
                progress.update(task, completed=done, total=total, description=label)

            record = ChipProfile.model_validate(profile_chip(device, chip, quick, on_step=step))
        kept = keep(record)
        if out_path is not None:
            try:
                record.save(out_path)
            except OSError as e:
                raise InputError(f"--out: cannot write {str(out_path)!r}: {e.strerror}") from None
        row_id = None
        if store_db:
            row_id = store(record)
    except PlacerError as e:
        _fail(e)
    where = f"kept as {kept} (plan with it: --profiles latest, or --profiles {kept})"
    if json_out:
        if out_path is None:
            print(record.to_json())
        else:  # the JSON is in the file: stdout is not flooded with it again
            err.print(f"wrote {out_path}", highlight=False, soft_wrap=True)
        err.print(where, highlight=False, soft_wrap=True)
        return
    out.print(chip_view(record))
    for line in record.skipped:
        out.print(f"[dim]skipped: {line}[/dim]", highlight=False)
    out.print(where, highlight=False, soft_wrap=True)
    if row_id is not None:
        out.print(f"stored as profile {row_id}")


@profile.command("link")
def link_command(
    listen: Annotated[int | None, typer.Option(help="Serve probes on this TCP port (0: pick one).")] = None,
    peer: Annotated[str | None, typer.Option(help="Probe the server at HOST:PORT.")] = None,
    bind: Annotated[str, typer.Option(help="Address the server listens on.")] = "0.0.0.0",
    streams: Annotated[int, typer.Option(min=1, max=256, help="Parallel TCP streams.")] = 4,
    seconds: Annotated[float, typer.Option(min=0.1, help="How long the streams send.")] = 5.0,
    shape_gbit: Annotated[float | None, typer.Option(
        "--shape-gbit", min=0.0001, help="Rate-limit the senders to this many Gbit/s (token bucket).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the link profile JSON.")] = False,
) -> None:
    """TCP bandwidth over parallel streams and RTT between two hosts."""
    if (listen is None) == (peer is None):
        _fail(InputError("profile link: give exactly one of --listen PORT or --peer HOST:PORT"))
    if listen is not None:
        try:
            link.serve(listen, bind, on_ready=lambda h, p: out.print(f"listening on {h}:{p}", highlight=False),
                       log=lambda line: out.print(line, highlight=False))
        except OSError as e:
            _fail(InputError(f"--listen {listen}: {e.strerror or e}"))
        except KeyboardInterrupt:
            pass
        return
    try:
        link.parse_peer(peer)
    except ValueError as e:
        _fail(InputError(str(e)))
    try:
        with _progress(json_out) as progress:
            task = progress.add_task(f"probing {peer}", total=1.0)
            result = link.probe(peer, streams, seconds, shape_gbit,
                                on_progress=lambda f: progress.update(task, completed=f))
    except OSError as e:
        _fail(InputError(f"--peer {peer}: {e.strerror or e}"))
    record = LinkProfile.model_validate(result)
    if json_out:
        print(record.to_json())
        return
    out.print(f"{peer}: {record.link_gbit_per_s:.3f} Gbit/s over {streams} streams "
              f"(per stream {', '.join(f'{s:.3f}' for s in record.per_stream_gbit_per_s)}), "
              f"RTT {record.rtt_ms:.3f} ms, jitter {record.jitter_ms:.3f} ms"
              + (f"; shaped to {shape_gbit} Gbit/s" if shape_gbit else ""), highlight=False)
    out.print(json.dumps({"gbit_per_s": round(record.link_gbit_per_s, 3), "rtt_ms": round(record.rtt_ms, 3),
                          "jitter_ms": round(record.jitter_ms, 3)}), highlight=False)


@profile.command("model")
def model_command(
    device: Annotated[str, typer.Option(help="torch device: cpu (torch ops) or cuda / cuda:N (Triton kernels).")] = "cpu",
    model: Annotated[str, typer.Option(help="Catalog model whose shape is built (random weights).")] = "llama-3.1-8b",
    tp: Annotated[int, typer.Option(help="Chips per instance (the engine runs one: 1).")] = 1,
    grid: Annotated[str, typer.Option(help="tiny (smoke check), quick (CPU: under a minute for a tiny shape), serve "
                                         "(bench_serve's sizes: prompts to 2K, batches to 16), gpu (an 8B model on "
                                         "an 80 GB card: prompts to 8K after 8K, batches to 64 at 4K) or full.")
                ] = "quick",
    chip: Annotated[str | None, typer.Option(help="Catalog chip the table is for (default: from the device; "
                                             "'cpu' on the CPU).")] = None,
    reps: Annotated[int, typer.Option(min=1, help="Timed runs per grid point (the median is kept).")] = 5,
    rounds: Annotated[int, typer.Option(min=1, help="Passes over the whole grid, each point --reps times per pass; "
                                        "the median of all a point's runs is kept (a shared machine's bursts "
                                        "then reach one pass, not the point).")] = 1,
    layers: Annotated[int | None, typer.Option(help="Override: decoder layers.")] = None,
    hidden: Annotated[int | None, typer.Option(help="Override: hidden size.")] = None,
    heads: Annotated[int | None, typer.Option(help="Override: query heads.")] = None,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help="Override: KV heads.")] = None,
    head_dim: Annotated[int | None, typer.Option("--head-dim", help="Override: head dimension.")] = None,
    intermediate: Annotated[int | None, typer.Option(help="Override: FFN width (default 3.5 x hidden).")] = None,
    vocab: Annotated[int | None, typer.Option(help="Override: vocabulary (default 128256).")] = None,
    dtype: Annotated[str | None, typer.Option(help="Engine dtype: bfloat16 or float32 (default: bfloat16 on "
                                              "CUDA, float32 on the CPU, as the executor runs there).")] = None,
    name: Annotated[str | None, typer.Option(help="The table's model name, as the scenario's model is named "
                                             "(default: the catalog name, or llama-tiny-<hash> for a changed "
                                             "shape).")] = None,
    clock: Annotated[str | None, typer.Option(help="wall, or thread: the timing thread's CPU time (CPU only; "
                                              "its default there: one core's seconds, robust on a shared "
                                              "machine).")] = None,
    out_path: Annotated[Path | None, typer.Option("--out", help="Write the profile JSON here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the profile JSON.")] = False,
) -> None:
    """Measure prefill and decode latency grids of a model with the executor's engine; write a profile."""
    from profiler.model import profile_model

    overrides = {"num_layers": layers, "hidden_size": hidden, "num_q_heads": heads, "num_kv_heads": kv_heads,
                 "head_dim": head_dim, "intermediate_size": intermediate, "vocab_size": vocab}
    try:
        with _progress(json_out) as progress:
            task = progress.add_task("grid points", total=1)
            raw = profile_model(device, model, tp, grid, chip, reps, overrides,
                                on_point=lambda done, total: progress.update(task, completed=done, total=total),
                                dtype=dtype, name=name, clock=clock, rounds=rounds)
        record = ChipProfile.model_validate(raw)
        if out_path is not None:
            try:
                record.save(out_path)
            except OSError as e:
                raise InputError(f"--out: cannot write {str(out_path)!r}: {e.strerror}") from None
    except PlacerError as e:
        _fail(e)
    if json_out:
        print(record.to_json())
        return
    table = record.tables[0]
    out.print(f"{table.model} on {table.chip} ({table.engine}, {table.device}): "
              f"{len(table.prefill.sizes) * len(table.prefill.context_tokens)} prefill and "
              f"{len(table.decode.sizes) * len(table.decode.context_tokens)} decode points in "
              f"{record.duration_s:.1f} s" + (f"; wrote {out_path}" if out_path else ""), highlight=False)
    for phase, grid_record in (("prefill", table.prefill), ("decode", table.decode)):
        axis = "tokens" if phase == "prefill" else "batch"
        for size, row in zip(grid_record.sizes, grid_record.seconds):
            cells = ", ".join(f"ctx {c:g}: {s * 1e3:.2f} ms" for c, s in zip(grid_record.context_tokens, row))
            out.print(f"  {phase} {axis} {size:g}: {cells}", highlight=False)
        moved = grid_record.grid().max_cleanup_rel
        if moved > 0.05:
            out.print(f"  [yellow]{phase}: not monotone as measured; the planner's clean-up moves a point by up "
                      f"to {moved:.0%} (a loaded machine? measure again with --rounds 3)[/yellow]", highlight=False)


@profile.command("import-kernels")
def import_kernels_command(
    db: Annotated[Path, typer.Option(help="AIConfigurator's measured database: the aiconfigurator_core/systems/data "
                                          "directory (tools/kernel_db_venv.sh installs it in .venv-kernels).")],
    system: Annotated[str, typer.Option(help="The database's system, e.g. h200_sxm, h100_sxm, b200_sxm, a100_sxm, "
                                              "l40s.")],
    engine: Annotated[str, typer.Option(help="trtllm, sglang or vllm.")],
    version: Annotated[str | None, typer.Option(help="The engine's version (default: the newest the system "
                                                      "measured GEMMs with).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Tables directory (default: the shipped "
                                                                "placer/kernels/data).")] = None,
    thin: Annotated[bool, typer.Option(help="Leave out GEMM rows at m = 16j + 1 (smaller; see docs/kernels.md "
                                            "for what it costs).")] = False,
) -> None:
    """Import the engines' measured per-kernel database into placer's own per-op tables (needs pyarrow)."""
    from placer.kernels.importer import import_tables
    from placer.kernels.tables import DATA_DIR

    try:
        prov = import_tables(db, system, engine, version, out_dir or DATA_DIR, thin=thin)
    except PlacerError as e:
        _fail(e)
    for family, counts in prov["families"].items():
        dropped = sum(counts["dropped"].values())
        out.print(f"  {family}: {counts['rows_kept']} shapes kept of {counts['rows_read']} rows"
                  + (f", {dropped} dropped ({', '.join(f'{n} {why}' for why, n in counts['dropped'].items())})"
                     if dropped else ""), highlight=False)
    out.print(f"{system} {engine}-{prov['version']}: wrote {len(prov['families'])} tables under "
              f"{(out_dir or DATA_DIR) / system / (engine + '-' + prov['version'])}", highlight=False)
