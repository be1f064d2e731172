#!/usr/bin/env bash
# Regenerate every shipped per-op table (placer/kernels/data) from AIConfigurator's measured
# kernel database, with the venv tools/kernel_db_venv.sh builds (docs/kernels.md).
#
#   tools/import_kernels.sh [DB_DIR]
#
# DB_DIR defaults to the database inside .venv-kernels (aiconfigurator_core/systems/data).
# The systems and engines below are what the repository ships; each engine at its newest
# version measured on the system (the importer's version rule).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=".venv-kernels"
[ -x "$VENV/bin/python" ] || tools/kernel_db_venv.sh "$VENV"
DB="${1:-$("$VENV/bin/python" -c 'import importlib.util, pathlib; spec = importlib.util.find_spec("aiconfigurator_core"); print(pathlib.Path(spec.submodule_search_locations[0]) / "systems" / "data")')}"
SYSTEMS="h100_sxm h200_sxm b200_sxm a100_sxm l40s"
ENGINES="trtllm sglang vllm"

rm -rf placer/kernels/data
for system in $SYSTEMS; do
    for engine in $ENGINES; do
        PYTHONPATH=. "$VENV/bin/python" -m placer.kernels.importer --db "$DB" --system "$system" --engine "$engine"
    done
done
du -sh placer/kernels/data
