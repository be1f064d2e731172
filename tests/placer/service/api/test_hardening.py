"""Issue 43's service defects over the API: a stored profile that poisons solves, file paths named
by a client, a crontab that never fires, redirects that reflect Host, the dashboard's headers, a
token whose parameter name is URL-encoded."""

from __future__ import annotations

import pytest

from placer.service.api.logs import REDACTED, redact
from tests.db.support import micro
from tests.placer.service.api.support import TOKEN, wait_solve


@pytest.mark.parametrize("efficiency", [1e-300, 5e-324, 1e-4])
def test_a_profile_with_a_vanishing_efficiency_is_422_naming_the_field(client, efficiency):
    r = client.post("/profiles", json={"chip": "H100-SXM", "compute_efficiency": efficiency})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][-1] == "compute_efficiency"
    assert client.get("/profiles").json()["total"] == 0


def test_a_stored_profile_that_would_poison_the_milp_fails_its_requests_with_the_reason(client, app):
    # a row stored before the floor existed (the fuzzer stored 5e-324): once "internal error: ValueError:
    # Expected finite coefficients" on every solve of the chip and a 500 on /compare
    from db import repo
    from db.session import session_scope

    with session_scope(app.state.service.factory) as session:
        bad = repo.add_profile(session, chip="H100-SXM", compute_efficiency=5e-324).id
    job = client.post("/plans", json={"scenario": micro()})
    assert job.status_code == 422, job.text
    assert f"profile {bad}" in job.text and "compute_efficiency" in job.text
    compare = client.post("/compare", json={"scenario": micro(), "time_limit_s": 10})
    assert compare.status_code == 422 and f"profile {bad}" in compare.text
    unaffected = client.post("/plans", json={"scenario": micro(), "use_profiles": False})
    assert wait_solve(client, unaffected.json()["id"])["status"] == "SUCCEEDED"
    assert client.delete(f"/profiles/{bad}").status_code == 204
    again = client.post("/plans", json={"scenario": micro()})
    assert wait_solve(client, again.json()["id"])["status"] == "SUCCEEDED"


@pytest.mark.parametrize("path", ["/bin/ls", "../../etc/passwd", "profiles/"])
def test_a_scenario_over_the_api_names_no_server_file(client, path):
    for route in ("/plans", "/scenarios"):
        r = client.post(route, json={"scenario": micro(profiles=[path])} if route == "/plans"
                        else micro(profiles=[path]))
        assert r.status_code == 422, (route, r.text)
        assert "profiles" in r.text and "file path" in r.text


def test_a_crontab_that_never_fires_is_422(client):
    sid = client.post("/scenarios", json=micro()).json()["id"]
    r = client.post("/jobs", json={"name": "never", "scenario_id": sid,
                                   "schedule": {"kind": "cron", "expr": "0 0 31 2 *"},
                                   "workload": {"kind": "request_log"}})
    assert r.status_code == 422 and "never fires" in r.text and "expr" in r.text


def test_a_slash_redirect_does_not_reflect_the_host(client):
    r = client.get("/plans/", headers={"Host": "evil.example"}, follow_redirects=False)
    assert r.status_code in (307, 308)
    assert r.headers["location"] == "/plans" and "evil" not in r.headers["location"]
    login = client.get("/ui", headers={"Host": "evil.example"}, follow_redirects=False)
    assert "evil" not in login.headers.get("location", "")


def test_the_dashboard_forbids_framing_sniffing_and_scripts(client):
    page = client.get("/ui/login", headers={"Authorization": ""})
    assert page.status_code == 200
    assert page.headers["x-frame-options"] == "DENY" and page.headers["x-content-type-options"] == "nosniff"
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'none'" in csp
    api = client.get("/plans")
    assert api.headers["x-content-type-options"] == "nosniff" and api.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("url", [f"/ui/login?tok%65n={TOKEN}", f"/ui/login?%74%6F%6B%65%6E={TOKEN}&next=/ui",
                                 f"/ui/login?next=%2Fui%3Ftok%2565n%3D{TOKEN}", f"/x?ACCESS%5FTOKEN={TOKEN}"])
def test_a_token_under_a_url_encoded_name_is_redacted(url):
    assert TOKEN not in redact(url) and REDACTED in redact(url)


def test_every_dashboard_page_carries_the_content_policy(client):
    for path in ("/", "/ui/jobs", "/ui/plans/12345"):
        page = client.get(path)
        assert page.headers["content-type"].startswith("text/html"), path
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"], path
