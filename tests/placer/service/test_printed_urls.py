"""Every address ``placer serve`` and the README print answers, on a real ``placer serve`` over HTTP;
a plan brought in with ``placer plans import --scenario`` (as ``placer optimize --out`` suggests) says
on the dashboard why it looks so.

in:  the README, ``placer serve``'s banner, ``placer plans import``'s line, a running service
out: each printed URL answers 200 with the token, and 200 or the documented redirect to the
     sign-in page (``/ui/login``) without it; the imported plan's page has a "why this plan"
     list, not the note that its scenario is missing

The deployment's addresses (``placer deploy``'s banner, ``http://127.0.0.1:8000`` in the README)
are requested by tests/test_readme_replanning.py, which starts a deployment on Ray.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "printed-urls-test-token"
README_PORT = 8080  # the README's service address: http://127.0.0.1:8080/...
URL = re.compile(r"https?://[\w.\[\]:-]+(?:/[\w./%?=&-]*)?")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _placer(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placer.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """A ``placer serve`` in its own process on a free port: (base URL, its banner, env, folder)."""
    tmp = tmp_path_factory.mktemp("serve")
    port = _free_port()
    env = {**os.environ, "PLACER_DATABASE_URL": f"sqlite:///{tmp / 'placer.db'}", "COLUMNS": "200"}
    env.pop("PLACER_API_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "placer.cli", "serve", "--port", str(port), "--token", TOKEN,
                             "--no-scheduler"], env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "placer serve did not come up"
                time.sleep(0.2)
        banner = ""
        while "token:" not in banner:  # the banner's last line names the token
            banner += proc.stderr.readline()
        yield base, banner, env, tmp
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _answers(url: str) -> None:
    """200 with the token; without it 200, or redirects that end on the sign-in page."""
    with httpx.Client(follow_redirects=True, timeout=30) as anonymous:
        response = anonymous.get(url)
        assert response.status_code == 200, (url, response.status_code)
        if response.url.path != httpx.URL(url).path or response.history:
            assert response.url.path == "/ui/login", (url, str(response.url))
    signed = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, follow_redirects=True, timeout=30)
    assert signed.status_code == 200 and signed.url.path != "/ui/login", (url, signed.status_code, str(signed.url))


def test_every_url_the_serve_banner_prints_answers(service):
    base, banner, _, _ = service
    urls = URL.findall(banner)
    assert f"{base}/ui/" in urls and f"{base}/docs" in urls, banner
    for url in urls:
        _answers(url)


def test_every_service_url_the_readme_prints_answers(service):
    base, _, _, _ = service
    text = (ROOT / "README.md").read_text()
    service = re.compile(rf"https?://(127\.0\.0\.1|localhost):{README_PORT}\b")
    urls = {u.rstrip(".,)") for u in URL.findall(text) if service.match(u)}
    assert urls, "the README prints no service address"
    for url in sorted(urls):
        _answers(re.sub(rf"^https?://[^/]+:{README_PORT}", base, url))


def test_an_imported_plan_with_its_scenario_says_why_on_the_dashboard(service):
    base, _, env, tmp = service
    scenario = ROOT / "examples" / "pdd-two-dc.yaml"
    made = _placer("optimize", str(scenario), "--out", "plan.json", env=env, cwd=tmp)
    assert made.returncode == 0, made.stderr
    hint = re.search(r"bring it to the dashboard: placer (plans import .*)", made.stdout)
    assert hint, made.stdout[-800:]  # optimize names the next step, which is run here as printed
    imported = _placer(*shlex.split(hint.group(1)), env=env, cwd=tmp)
    assert imported.returncode == 0, imported.stderr
    path = re.search(r"on the dashboard at (/ui/plans/\d+)", imported.stdout).group(1)
    _answers(base + path)
    page = httpx.get(base + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).text
    why = re.search(r'<(ul|p)[^>]*id="why"[^>]*>(.*?)</\1>', page, re.S)
    assert why and why.group(1) == "ul" and "<li>" in why.group(2), why and why.group(0)[:400]

    alone = _placer("plans", "import", "plan.json", env=env, cwd=tmp)
    assert alone.returncode == 0 and "--scenario" in alone.stdout, alone.stdout
