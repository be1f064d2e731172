"""The executor's `placer` commands, as placer's command registry reads them (imports nothing)."""

DEPLOY = ("executor.cli:deploy", "Deploy a plan on Ray and serve it (OpenAI-style /v1/completions).")
