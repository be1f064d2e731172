"""Chips, profiles and scenarios: CRUD, 409 on conflicts, 422 naming the field and reason."""

from __future__ import annotations

from tests.placer.service.api.support import solved_plan
from tests.db.support import micro


def _msg(response) -> str:
    return " ".join(d["msg"] + " " + ".".join(map(str, d["loc"])) for d in response.json()["detail"])


# --- chips --------------------------------------------------------------------------

def test_chip_list_holds_the_catalog_and_custom_chips(client):
    names = {c["name"]: c["source"] for c in client.get("/chips").json()}
    assert names["H100-SXM"] == "catalog" and names["L40S"] == "catalog"
    created = client.post("/chips", json={"name": "GPU-B", "base": "H20", "price_usd_per_h": 1.5})
    assert created.status_code == 201 and created.json()["source"] == "custom"
    assert client.get("/chips/GPU-B").json()["spec"] == {"name": "GPU-B", "base": "H20", "price_usd_per_h": 1.5}
    assert client.get("/chips/H100-SXM").json()["spec"]["mem_gb"] == 80


def test_chip_conflicts_and_bad_input(client):
    assert client.post("/chips", json={"name": "GPU-B", "base": "H20"}).status_code == 201
    dup = client.post("/chips", json={"name": "GPU-B", "base": "H20"})
    assert dup.status_code == 409 and "already exists" in dup.json()["detail"]
    catalog = client.post("/chips", json={"name": "H100-SXM", "base": "H20"})
    assert catalog.status_code == 409 and "catalog" in catalog.json()["detail"]
    unknown_base = client.post("/chips", json={"name": "GPU-C", "base": "H999"})
    assert unknown_base.status_code == 422 and "H999" in _msg(unknown_base) and "base" in _msg(unknown_base)
    negative = client.post("/chips", json={"name": "GPU-D", "base": "H20", "mem_gb": -1})
    assert negative.status_code == 422 and "mem_gb" in _msg(negative)
    no_base = client.post("/chips", json={"name": "GPU-E", "mem_gb": 80})
    assert no_base.status_code == 422 and "bf16_tflops" in _msg(no_base)
    assert client.delete("/chips/H100-SXM").status_code == 409
    assert client.delete("/chips/nope").status_code == 404


def test_custom_chip_update_and_delete(client):
    client.post("/chips", json={"name": "GPU-B", "base": "H20"})
    updated = client.put("/chips/GPU-B", json={"name": "GPU-B", "base": "H20", "price_usd_per_h": 0.9})
    assert updated.status_code == 200 and updated.json()["spec"]["price_usd_per_h"] == 0.9
    mismatch = client.put("/chips/GPU-B", json={"name": "GPU-Z", "base": "H20"})
    assert mismatch.status_code == 422
    assert client.delete("/chips/GPU-B").status_code == 204
    assert client.get("/chips/GPU-B").status_code == 404


def test_a_scenario_may_use_a_stored_custom_chip(client):
    client.post("/chips", json={"name": "GPU-B", "base": "L40S", "price_usd_per_h": 0.8})
    spec = micro(name="custom", datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 4}},
                                             {"name": "dc-b", "inventory": {"GPU-B": 4}}])
    created = client.post("/scenarios", json=spec)
    assert created.status_code == 201
    job, plan = solved_plan(client, {"scenario_id": created.json()["id"]})
    inputs = client.get(f"/plans/{job['plan_id']}/inputs").json()
    assert {"name": "GPU-B", "base": "L40S", "price_usd_per_h": 0.8} in inputs["scenario"]["chips"]
    assert plan["scenario"] == "custom"


# --- profiles -----------------------------------------------------------------------

def test_profiles_are_validated_and_the_newest_calibrates_solves(client):
    unknown = client.post("/profiles", json={"chip": "H999", "compute_efficiency": 0.5})
    assert unknown.status_code == 422 and "H999" in _msg(unknown)
    too_fast = client.post("/profiles", json={"chip": "H100-SXM", "compute_efficiency": 1.2})
    assert too_fast.status_code == 422 and "compute_efficiency" in _msg(too_fast)
    empty = client.post("/profiles", json={"chip": "H100-SXM"})
    assert empty.status_code == 422 and "at least one" in _msg(empty)
    naive = client.post("/profiles", json={"chip": "H100-SXM", "compute_efficiency": 0.5,
                                           "measured_at": "2026-01-01T00:00:00"})
    assert naive.status_code == 422 and "measured_at" in _msg(naive)
    old = client.post("/profiles", json={"chip": "H100-SXM", "compute_efficiency": 0.4,
                                         "measured_at": "2026-01-01T00:00:00Z", "measured_by": "bench-1"})
    new = client.post("/profiles", json={"chip": "H100-SXM", "compute_efficiency": 0.6, "mem_bw_efficiency": 0.85,
                                         "measured_at": "2026-02-01T00:00:00Z", "software": "torch 2.13"})
    assert old.status_code == new.status_code == 201
    listed = client.get("/profiles", params={"chip": "H100-SXM"}).json()
    assert listed["total"] == 2 and listed["items"][0]["id"] == new.json()["id"]
    job, plan = solved_plan(client, {"scenario": micro()})
    measured = client.get(f"/plans/{job['plan_id']}/inputs").json()["measured"]
    assert measured["H100-SXM"]["compute_efficiency"] == 0.6
    assert any("H100-SXM" in n and "profile" in n for n in plan["notes"])
    job2, _ = solved_plan(client, {"scenario": micro(), "use_profiles": False})
    assert client.get(f"/plans/{job2['plan_id']}/inputs").json()["measured"] == {}
    assert client.delete(f"/profiles/{new.json()['id']}").status_code == 204
    assert client.get(f"/profiles/{new.json()['id']}").status_code == 404


# --- scenarios ----------------------------------------------------------------------

def test_scenario_crud(client):
    created = client.post("/scenarios", json=micro())
    assert created.status_code == 201
    sid = created.json()["id"]
    assert created.json()["spec"] == micro()
    assert client.get(f"/scenarios/{sid}").json()["name"] == "micro"
    replaced = client.put(f"/scenarios/{sid}", json=micro(name="micro-2"))
    assert replaced.status_code == 200 and replaced.json()["name"] == "micro-2"
    listed = client.get("/scenarios", params={"name_contains": "micro"}).json()
    assert listed["total"] == 1 and listed["items"][0]["id"] == sid
    assert client.delete(f"/scenarios/{sid}").status_code == 204
    assert client.get(f"/scenarios/{sid}").status_code == 404
    assert client.delete(f"/scenarios/{sid}").status_code == 404


def test_duplicate_scenario_names_conflict(client):
    assert client.post("/scenarios", json=micro()).status_code == 201
    dup = client.post("/scenarios", json=micro())
    assert dup.status_code == 409 and "micro" in dup.json()["detail"]
    other = client.post("/scenarios", json=micro(name="other")).json()["id"]
    assert client.put(f"/scenarios/{other}", json=micro()).status_code == 409


def test_invalid_scenarios_are_422_naming_field_and_reason(client):
    shares = micro()
    shares["workload"]["classes"][0]["share"] = 0.5
    r = client.post("/scenarios", json=shares)
    assert r.status_code == 422 and "shares must sum to 1" in _msg(r)
    link = micro(links=[{"src": "dc-a", "dst": "dc-z", "gbit_per_s": 10, "rtt_ms": 20}])
    r = client.post("/scenarios", json=link)
    assert r.status_code == 422 and "dc-z" in _msg(r)
    chip = micro(datacenters=[{"name": "dc-a", "inventory": {"H999": 1}}, {"name": "dc-b", "inventory": {"L40S": 1}}])
    r = client.post("/scenarios", json=chip)
    assert r.status_code == 422 and "datacenters[0].inventory" in _msg(r) and "H999" in _msg(r)
    model = micro(model="gpt-9")
    r = client.post("/scenarios", json=model)
    assert r.status_code == 422 and "gpt-9" in _msg(r)
    extra = micro(colour="blue")
    r = client.post("/scenarios", json=extra)
    assert r.status_code == 422 and "colour" in _msg(r)
    rps = micro()
    rps["workload"]["arrival_rps"] = -1
    r = client.post("/scenarios", json=rps)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "workload", "arrival_rps"]
    not_json = client.post("/scenarios", content=b"{not json", headers={"content-type": "application/json"})
    assert not_json.status_code == 422
    assert client.get("/scenarios").json()["total"] == 0
