#!/usr/bin/env bash
# The wheels bench/gpu_check.sh needs on the device machine beside its image (torch, triton, typer,
# rich, numpy are there; pydantic is not): downloaded HERE into .whl/ (git-ignored) for the device's
# Python 3.12 on x86-64, at the versions this checkout's environment runs. Carry ".whl" in the device
# call; gpu_check.sh installs them into /tmp/site first when the folder is there.
#
#   bash bench/gpu_wheels.sh && ls .whl
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
mkdir -p .whl
for pkg in pydantic pydantic_core annotated_types typing_inspection typing_extensions; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "${pkg//_/-}==$(version "${pkg//_/-}")"
done
du -sh .whl
