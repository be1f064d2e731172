#!/usr/bin/env bash
# Build the venv whose only job is to hold SGLang's and vLLM's own argument parsers, so
# tests/placer/export/ can run every command `placer export` writes through them.
#
#   tools/engine_args_venv.sh [VENV_DIR]      (default: build/engine-args-venv; .ci/run calls it)
#
# The engines are installed with --no-deps (their full dependency sets pull CUDA builds);
# beside them only the modules their argument parsers import, and torch at the project's
# pin (==2.13.0, the CPU build). Idempotent: a venv whose stamp matches is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${1:-build/engine-args-venv}"
PY="${PYTHON:-python3}"
SGLANG_VERSION="0.5.23"
VLLM_VERSION="0.33.0"
TORCH_VERSION="2.13.0"
STAMP="sglang==${SGLANG_VERSION} vllm==${VLLM_VERSION} torch==${TORCH_VERSION} v1"

if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.stamp" 2>/dev/null)" = "$STAMP" ]; then
    echo "engine-args venv ready: $VENV ($STAMP)"
    exit 0
fi

start=$(date +%s)
rm -rf "$VENV"
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
# torch at the project's pin, resolved as `make setup` resolves it (this machine's pip
# configuration finds the CPU build)
"${PIP[@]}" "torch==${TORCH_VERSION}"
# the engines themselves, without their dependency trees
"${PIP[@]}" --no-deps "sglang==${SGLANG_VERSION}" "vllm==${VLLM_VERSION}"
# what sglang.srt.server_args and vllm.engine.arg_utils import at module level
"${PIP[@]}" numpy orjson psutil pybase64 requests packaging pillow starlette msgspec \
    pydantic pyzmq tqdm ipython aiohttp
echo "$STAMP" > "$VENV/.stamp"
echo "engine-args venv built in $(( $(date +%s) - start )) s: $VENV ($STAMP)"
