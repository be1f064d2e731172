"""`python -m placer.cli` runs the `placer` command."""

from placer.cli.app import main

main()
