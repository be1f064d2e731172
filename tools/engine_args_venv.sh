#!/usr/bin/env bash
# Build the venv whose only job is to hold the checkers of `placer export`'s output: SGLang's,
# sglang-router's and vLLM's own argument parsers, and kubernetes-validate (the Kubernetes
# OpenAPI schemas, bundled) — tests/placer/export/ runs every generated command and manifest
# through them in a subprocess with this venv's python.
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
ROUTER_VERSION="0.3.2"
VLLM_VERSION="0.33.0"
TORCH_VERSION="2.13.0"
KUBE_VALIDATE_VERSION="1.37.0"
STAMP="sglang==${SGLANG_VERSION} sglang-router==${ROUTER_VERSION} vllm==${VLLM_VERSION} torch==${TORCH_VERSION} kubernetes-validate==${KUBE_VALIDATE_VERSION} v2"

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
echo "  torch: $(( $(date +%s) - start )) s"
# the engines themselves, without their dependency trees (they pin CUDA builds and torch 2.14)
"${PIP[@]}" --no-deps "sglang==${SGLANG_VERSION}" "sglang-router==${ROUTER_VERSION}" "vllm==${VLLM_VERSION}"
echo "  engines: $(( $(date +%s) - start )) s"
# what their argument parsers import at module level (found by importing until nothing was
# missing): sglang.srt.server_args, sglang_router.launch_router, vllm serve's parser; torch is
# named again so that the resolver keeps the pin
"${PIP[@]}" "torch==${TORCH_VERSION}" "triton==3.9.0" "transformers==5.19.0" \
    numpy orjson psutil pybase64 requests packaging pillow starlette msgspec pydantic pyzmq tqdm \
    ipython aiohttp huggingface_hub regex cbor2 openai openai-harmony cloudpickle cachetools uvloop \
    py-cpuinfo prometheus_client xgrammar fastapi partial-json-parser llguidance setproctitle uvicorn \
    pyyaml "kubernetes-validate==${KUBE_VALIDATE_VERSION}"
echo "$STAMP" > "$VENV/.stamp"
echo "engine-args venv built in $(( $(date +%s) - start )) s: $VENV ($STAMP)"
