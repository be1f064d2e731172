#!/usr/bin/env bash
# Build the venv whose only job is to read NVIDIA AIConfigurator's measured kernel database
# (Apache-2.0, https://github.com/ai-dynamo/aiconfigurator) when placer's per-op tables are
# (re)generated: aiconfigurator-core (the parquet files under aiconfigurator_core/systems/data)
# and pyarrow (the reader). The planner never imports either; tools/import_kernels.sh runs
# `python -m placer.kernels.importer` with this venv's python (placer's importer itself needs
# only the standard library besides pyarrow).
#
#   tools/kernel_db_venv.sh [VENV_DIR]      (default: .venv-kernels, gitignored)
#
# aiconfigurator-core is installed with --no-deps: only its data files are read, never its code.
# Idempotent: a venv whose stamp matches is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${1:-.venv-kernels}"
PY="${PYTHON:-python3}"
AIC_VERSION="0.12.0"
PYARROW_SPEC="pyarrow>=15"
STAMP="aiconfigurator-core==${AIC_VERSION} ${PYARROW_SPEC} v1"

if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.stamp" 2>/dev/null)" = "$STAMP" ]; then
    echo "kernel-db venv ready: $VENV ($STAMP)"
    exit 0
fi

start=$(date +%s)
rm -rf "$VENV"
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --no-deps "aiconfigurator-core==${AIC_VERSION}"
"${PIP[@]}" "$PYARROW_SPEC"
echo "$STAMP" > "$VENV/.stamp"
echo "kernel-db venv built in $(( $(date +%s) - start )) s: $VENV ($STAMP)"
