"""The profiler's ``placer`` commands, as placer's command registry reads them.

Named by the ``placer.commands`` entry point ``profile`` (pyproject.toml); this module
imports nothing, so ``placer --help`` lists the command without importing
:mod:`profiler.cli` (rich progress bars, pydantic records). The spec is
``(target, help line)``: the target ``module:attr`` is a ``typer.Typer`` (a command
group) or a plain function (one command), imported when the command runs.
"""

PROFILE = ("profiler.cli:profile", "Measure chips on the four dimensions and probe WAN links.")
