"""The dashboard in a real headless Chromium (Debian's, driven by Playwright) against a
real uvicorn server: sign in, open a seeded plan, read its diagram, open a diff, open
the jobs. Screenshots go to test-artifacts/dashboard/. Skipped, with the reason, where
/usr/bin/chromium or playwright is missing."""

from __future__ import annotations

import pytest

from tests.placer.service.dashboard.support import TOKEN, artifact, browser_missing, chromium, make_app
from tests.support import live_server

pytestmark = pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def site(seeded):
    with live_server(make_app(seeded.url)) as url:
        yield url


@pytest.fixture
def page(browser, site):
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def _sign_in(page, site, next_path: str) -> None:
    page.goto(f"{site}{next_path}")
    assert "/ui/login" in page.url  # sent to sign in first
    page.fill("input[name=token]", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_a_seeded_plan_opens_with_its_pools_drawn(page, site, seeded, micro_plans):
    _sign_in(page, site, "/ui/")  # the address placer serve prints
    page.screenshot(path=artifact("dashboard", "plans.png"), full_page=True)
    assert page.locator("#plans tbody tr").count() == 2
    page.click(f"#plans a[href='/ui/plans/{seeded.plan_a}']")
    page.wait_for_url(f"**/ui/plans/{seeded.plan_a}")
    diagram = page.locator("#diagram svg")
    assert diagram.is_visible()
    box = diagram.bounding_box()
    assert box["width"] > 600 and box["height"] > 200  # drawn at a readable size, not collapsed
    texts = diagram.locator("text").all_text_contents()
    for p in micro_plans[0].pools:
        assert page.locator(f"#pool-{p.role}-{p.datacenter}-{p.chip}-tp{p.tp}").count() == 1
        assert any(p.chip in t and f"TP{p.tp}" in t and f"× {p.count}" in t for t in texts), (p, texts)
    assert {"dc-a", "dc-b"} <= set(texts)
    assert page.locator("#binding tbody tr").count() == len(micro_plans[0].binding)
    # every column of the pools table is in view at a laptop's width, not behind a scroll bar
    assert page.locator("#pools th").count() == 8  # utilisation and KV columns: the plan came with its scenario
    assert page.evaluate("() => { const t = document.querySelector('#pools');"
                         " return t.scrollWidth <= t.parentElement.clientWidth; }")
    page.screenshot(path=artifact("dashboard", "plan.png"), full_page=True)


def test_the_diff_page_shows_the_changed_counts(page, site, seeded):
    _sign_in(page, site, "/ui/")  # the address placer serve prints
    page.fill("input[name=a]", str(seeded.plan_a))
    page.fill("input[name=b]", str(seeded.plan_b))
    page.click("form[action='/ui/diff'] button")
    page.wait_for_url(f"**/ui/plans/{seeded.plan_a}/diff/{seeded.plan_b}")
    rows = {tuple(c.strip() for c in r.locator("td").all_text_contents()[1:7])
            for r in page.locator("#pool-changes tbody tr").all()}
    assert seeded.changes
    for row in seeded.changes:
        assert (*row, f"{int(row[4]) - int(row[3]):+d}") in rows
    assert f"{len(seeded.changes)} pools changed" in page.inner_text("#diff-summary")
    assert page.locator("#diagram-from svg").is_visible() and page.locator("#diagram-to svg").is_visible()
    page.screenshot(path=artifact("dashboard", "diff.png"), full_page=True)


def test_the_jobs_page_shows_runs_and_decisions(page, site, seeded):
    _sign_in(page, site, "/ui/jobs")
    assert page.url.endswith("/ui/jobs")
    job = page.locator(f"#job-{seeded.job_id}")
    assert "micro-nightly" in job.inner_text()
    assert job.locator(".outcome-PROPOSED").count() == 1 and job.locator(".outcome-INITIAL").count() == 1
    page.screenshot(path=artifact("dashboard", "jobs.png"), full_page=True)
