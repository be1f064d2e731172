"""Run argument lists and manifests through the engines' own checkers (engine-args venv only).

Run as ``<engine-args venv>/bin/python engine_parsers.py`` with a JSON list on stdin of
``{"id": ..., "parser": "sglang" | "sglang-router" | "vllm", "args": [...]}`` or
``{"id": ..., "parser": "k8s", "manifest": {...}}``; prints a JSON list of
``{"id": ..., "ok": bool, "error": str}``. An argument the engine does not know makes its
argparse exit (status 2): that is ``ok: false`` with argparse's message.

Checkers: SGLang ``sglang.srt.server_args.prepare_server_args``; sglang-router
``sglang_router.launch_router.parse_router_args``; vLLM the ``vllm serve`` parser
(``make_arg_parser``), ``validate_parsed_serve_args`` and ``AsyncEngineArgs.from_cli_args``;
Kubernetes ``kubernetes_validate.validate(strict=True)`` against the bundled OpenAPI schemas
(a LeaderWorkerSet, a CRD without a bundled schema, has its pod templates validated as
``v1 PodTemplate`` and its counts checked here).
"""

import contextlib
import io
import json
import os
import sys

K8S_VERSION = "1.34"


def _sglang(args):
    from sglang.srt.server_args import prepare_server_args

    prepare_server_args(list(args))


def _router(args):
    from sglang_router.launch_router import parse_router_args

    parse_router_args(list(args))


def _vllm(args):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    ns = make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(list(args))
    validate_parsed_serve_args(ns)
    if getattr(ns, "model_tag", None):
        ns.model = ns.model_tag
    AsyncEngineArgs.from_cli_args(ns)


def _k8s(doc):
    import kubernetes_validate as kv

    if doc.get("kind") != "LeaderWorkerSet":
        kv.validate(doc, K8S_VERSION, strict=True)
        return
    spec = doc["spec"]
    lwt = spec["leaderWorkerTemplate"]
    if not isinstance(spec.get("replicas"), int) or not isinstance(lwt.get("size"), int) or lwt["size"] < 1:
        raise ValueError("LeaderWorkerSet: spec.replicas and leaderWorkerTemplate.size must be integers")
    extra = set(lwt) - {"size", "leaderTemplate", "workerTemplate", "restartPolicy", "subGroupPolicy"}
    if extra:
        raise ValueError(f"LeaderWorkerSet: unknown leaderWorkerTemplate fields {sorted(extra)}")
    for key in ("leaderTemplate", "workerTemplate"):
        kv.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": doc["metadata"]["name"]},
                     "template": lwt[key]}, K8S_VERSION, strict=True)


CHECKERS = {"sglang": _sglang, "sglang-router": _router, "vllm": _vllm}


def check(item):
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            if item["parser"] == "k8s":
                _k8s(item["manifest"])
            else:
                CHECKERS[item["parser"]](item["args"])
    except SystemExit as e:
        lines = [line for line in stderr.getvalue().splitlines() if "error" in line] or [f"exit {e.code}"]
        return {"id": item["id"], "ok": False, "error": lines[-1]}
    except Exception as e:  # the engine's own validation after parsing, or the schema's
        return {"id": item["id"], "ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
    return {"id": item["id"], "ok": True, "error": ""}


def main():
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # vLLM picks its platform at import; parsing needs none
    items = json.load(sys.stdin)
    json.dump([check(item) for item in items], sys.stdout)


if __name__ == "__main__":
    main()
