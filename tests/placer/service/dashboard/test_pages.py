"""The dashboard pages over HTTP (TestClient): sign-in, plan list and filters, one plan,
the diff of two plans, the jobs with their runs."""

from __future__ import annotations

import re

import pytest

from placer.service.dashboard.auth import COOKIE, safe_next
from tests.placer.service.dashboard.support import TOKEN


def _text(html: str) -> str:
    """Visible text of a page, tags dropped and whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_browser_without_the_token_is_sent_to_the_login_page(anonymous):
    for path in ("/ui/", "/ui/plans/1", "/ui/plans/1/diff/2", "/ui/jobs"):
        response = anonymous.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/ui/login?next=")
    assert anonymous.get("/ui/login").status_code == 200


def test_signing_in_sets_a_cookie_that_is_not_the_token_and_opens_the_pages(anonymous):
    wrong = anonymous.post("/ui/login", data={"token": "not-the-token", "next": "/ui/jobs"})
    assert wrong.status_code == 403 and "not the service" in wrong.text
    right = anonymous.post("/ui/login", data={"token": TOKEN, "next": "/ui/jobs"})
    assert right.status_code == 303 and right.headers["location"] == "/ui/jobs"
    cookie = right.cookies.get(COOKIE)
    assert cookie and TOKEN not in cookie
    assert "httponly" in right.headers["set-cookie"].lower()
    assert anonymous.get("/ui/jobs").status_code == 200
    # the cookie opens the read-only pages only: the API still wants the bearer header
    assert anonymous.get("/plans").status_code == 401
    anonymous.get("/ui/logout")
    assert anonymous.get("/ui/jobs").status_code == 303


def test_the_dashboard_is_at_ui_and_the_root_leads_there(anonymous, client, seeded):
    """``placer serve`` prints http://HOST:PORT/ui/: that address is the plans page; ``/`` and ``/ui``
    redirect to it, keeping their query."""
    assert 'data-plan-id' in client.get("/ui/", follow_redirects=False).text
    for path, target in (("/", "/ui/"), ("/ui", "/ui/"), ("/?scenario=micro", "/ui/?scenario=micro")):
        response = anonymous.get(path)
        assert response.status_code == 307 and response.headers["location"] == target, path
    assert len(re.findall(r"data-plan-id", client.get("/?scenario=micro").text)) == 2


def test_login_redirects_only_to_local_paths(anonymous):
    response = anonymous.post("/ui/login", data={"token": TOKEN, "next": "//evil.example/x"})
    assert response.status_code == 303 and response.headers["location"] == "/ui/"
    assert safe_next("https://evil.example") == "/ui/" and safe_next("/ui/plans/3") == "/ui/plans/3"


def test_a_token_in_the_login_url_is_refused_not_used(anonymous):
    response = anonymous.get("/ui/login", params={"token": TOKEN, "next": "/ui/jobs"})
    assert response.status_code == 400 and "not accepted in a URL" in response.text
    assert COOKIE not in response.cookies and TOKEN not in response.text
    assert anonymous.get("/ui/jobs").status_code == 303  # still signed out


@pytest.mark.parametrize("path", ["/ui/plans/99999999999999999999", "/ui/plans/0",
                                  "/ui/plans/99999999999999999999/plan.json", "/ui/plans/1/diff/99999999999999999999",
                                  "/ui/plans/99999999999999999999/diff/1", "/ui/diff?a=99999999999999999999&b=1"])
def test_an_id_no_row_can_have_is_a_404_page(client, path):
    response = client.get(path)
    assert response.status_code == 404 and "not found" in response.text


def test_the_plan_list_shows_both_plans_and_filters_them(client, seeded):
    page = client.get("/")
    assert page.status_code == 200
    ids = re.findall(r'data-plan-id="(\d+)"', page.text)
    assert ids == [str(seeded.plan_b), str(seeded.plan_a)]  # newest first
    assert re.findall(r'data-plan-id="(\d+)"', client.get("/", params={"objective": "min-cost"}).text) == []
    assert len(re.findall(r"data-plan-id", client.get("/", params={"scenario": "micro"}).text)) == 2
    assert re.findall(r"data-plan-id", client.get("/", params={"scenario": "other"}).text) == []
    bad = client.get("/", params={"objective": "fastest"})
    assert bad.status_code == 200 and "filter ignored" in bad.text


def test_a_plan_page_draws_its_pools_and_prices_its_binding_constraints(client, seeded, micro_plans):
    plan = micro_plans[0]
    page = client.get(f"/ui/plans/{seeded.plan_a}")
    assert page.status_code == 200
    svg = page.text[page.text.index("<svg"):page.text.index("</svg>")]
    for p in plan.pools:
        assert f'id="pool-{p.role}-{p.datacenter}-{p.chip}-tp{p.tp}"' in svg
        assert f"{p.chip}  TP{p.tp}  × {p.count}" in svg
    assert "dc-a" in svg and "dc-b" in svg and "10 Gbit/s line" in svg
    text = _text(page.text)
    assert plan.binding and all(b.marginal in text for b in plan.binding)
    assert f"{plan.metrics.bcr_requests_per_usd:.2f}" in text


def test_the_diff_page_shows_the_changed_pool_counts(client, seeded):
    page = client.get(f"/ui/plans/{seeded.plan_a}/diff/{seeded.plan_b}")
    assert page.status_code == 200
    rows = re.findall(r"<tr class=\"(\w+)\">(.*?)</tr>", page.text, re.DOTALL)
    cells = {tuple(re.findall(r">([^<>]+)</td>", body)[:5]): kind for kind, body in rows}
    assert seeded.changes, "the two seeded plans must differ for this page to show anything"
    for row, kind in seeded.changes.items():
        assert cells[row] == kind
    assert f"{len(seeded.changes)} pools changed" in _text(page.text)
    assert client.get(f"/ui/diff?a={seeded.plan_a}&b={seeded.plan_b}", follow_redirects=False).headers[
        "location"] == f"/ui/plans/{seeded.plan_a}/diff/{seeded.plan_b}"


def test_the_jobs_page_lists_runs_with_their_decisions(client, seeded):
    page = client.get("/ui/jobs")
    assert page.status_code == 200
    text = _text(page.text)
    assert "micro-nightly" in text and "PROPOSED" in text and "INITIAL" in text
    assert f'href="/ui/plans/{seeded.plan_a}/diff/{seeded.plan_b}"' in page.text


def test_a_job_without_a_schedule_reads_as_on_demand(client, seeded):
    import db
    from db import repo

    engine, factory = db.connect(seeded.url)
    try:
        with db.session_scope(factory) as s:
            scenario_id = repo.get_job(s, seeded.job_id).scenario_id
            repo.create_job(s, name="by-hand", scenario_id=scenario_id, schedule={"kind": "manual"},
                            workload={"kind": "request_log", "window_s": 3600.0, "min_requests": 20},
                            policy={"mode": "propose", "min_bcr_gain_pct": 0.0, "cooldown_s": 0.0},
                            objective="bcr", solver="ortools", time_limit_s=30.0, enabled=True)
    finally:
        engine.dispose()
    text = _text(client.get("/ui/jobs").text)
    assert "by-hand" in text and "on demand (run-now)" in text
    assert "cron ·" not in text


@pytest.mark.parametrize("path", ["/ui/plans/999", "/ui/plans/1/diff/999"])
def test_an_unknown_plan_is_an_html_404(client, path):
    page = client.get(path)
    assert page.status_code == 404 and "text/html" in page.headers["content-type"]
    assert "plan 999 not found" in page.text


def test_the_stylesheet_is_served_without_a_token(anonymous):
    css = anonymous.get("/ui/static/dashboard.css")
    assert css.status_code == 200 and ".diagram-box" in css.text


def test_a_public_dashboard_needs_no_token_but_the_api_still_does(seeded):
    from fastapi.testclient import TestClient

    from tests.placer.service.dashboard.support import make_app

    with TestClient(make_app(seeded.url, public=True), follow_redirects=False) as anonymous:
        assert anonymous.get("/ui/").status_code == 200
        assert anonymous.get(f"/ui/plans/{seeded.plan_a}").status_code == 200
        assert anonymous.get("/plans").status_code == 401


def test_mount_is_idempotent(app):
    from placer.service.dashboard import mount

    before = len(app.routes)
    mount(app)
    assert len(app.routes) == before
