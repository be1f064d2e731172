"""The `placer` command line (a thin face over the library): `app` and `main`."""

from placer.cli.app import app, main

__all__ = ["app", "main"]
