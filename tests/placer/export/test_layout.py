"""The rules of placer.export.layout on small hand-made plans: what each PDD pipeline becomes,
which pools are deployed, how instances span nodes, and what the flags say."""

from __future__ import annotations

import pytest

from placer.errors import InputError
from placer.export import ExportSettings, build_layout, export_plan
from placer.export.commands import server_commands, sglang_router_args
from placer.plan import parse_plan

SETTINGS = ExportSettings("org/model", "model", kv_dtype="fp8")


def plan(routes, pools=None):
    pools = pools or [
        {"role": "P", "datacenter": "dc-a", "chip": "H800-SXM", "tp": 8, "count": 2},
        {"role": "RLD", "datacenter": "dc-a", "chip": "H800-SXM", "tp": 8, "count": 1},
        {"role": "MD", "datacenter": "dc-b", "chip": "H20", "tp": 8, "count": 3},
    ]
    return parse_plan({"scenario": "t", "pools": pools, "routes": routes})


def route(pipeline, cls="c", src="dc-a", dst="dc-b", rps=1.0):
    return {"request_class": cls, "pipeline": pipeline, "src": src, "dst": dst, "rps": rps}


def test_relay_traffic_becomes_p_md_across_the_wan_and_the_relay_pool_is_not_deployed():
    layout = build_layout(plan([route("P-RLD-MD", rps=2.0), route("P-MD", "hot", rps=1.0)]), SETTINGS)
    assert [p.plan_role for p in layout.pools] == ["P", "MD"]
    (router,) = layout.routers
    assert (router.src, router.dst, router.rps) == ("dc-a", "dc-b", 3.0)
    text = " ".join(layout.caveats)
    assert "P-RLD-MD traffic runs as P-MD" in text and "8 chips freed" in text


def test_filtered_traffic_gets_its_own_same_dc_router_with_rld_as_plain_decode():
    layout = build_layout(plan([route("P-RLD", "odd", dst="dc-a", rps=0.2), route("P-MD", rps=3.0)]), SETTINGS)
    names = {r.name: r for r in layout.routers}
    filtered = names["router-dc-a-to-dc-a-filtered"]
    assert [p.plan_role for p in filtered.decode] == ["RLD"] and filtered.classes == ("odd",)
    assert [p.plan_role for p in names["router-dc-a-to-dc-b"].decode] == ["MD"]
    assert any("filter has no engine counterpart" in c for c in layout.caveats)


def test_an_instance_wider_than_a_node_spans_nodes_with_one_rendezvous():
    p = plan([route("P-MD")], pools=[{"role": "P", "datacenter": "dc-a", "chip": "H800-SXM", "tp": 16, "count": 1},
                                     {"role": "MD", "datacenter": "dc-b", "chip": "H20", "tp": 4, "count": 1}])
    commands = server_commands(build_layout(p, SETTINGS), "sglang")
    prefill = [c for c in commands if c.unit.startswith("p-")]
    assert [c.node for c in prefill] == [0, 1]
    assert all(c.args[c.args.index("--dist-init-addr") + 1] == "dc-a-p-h800-sxm-tp16-0:5000" for c in prefill)
    with pytest.raises(InputError, match="--chips-per-node 6"):
        build_layout(p, ExportSettings("m", "m", chips_per_node=6))


def test_decode_radix_cache_flag_follows_drc_and_prefill_never_gets_it():
    p = plan([route("P-MD")])
    for drc in (True, False):
        commands = server_commands(build_layout(p, ExportSettings("m", "m", drc=drc)), "sglang")
        decode = [c for c in commands if "decode" in c.args]
        assert all(("--disaggregation-decode-enable-radix-cache" in c.args) == drc for c in decode)
        assert not any("--disaggregation-decode-enable-radix-cache" in c.args for c in commands if "prefill" in c.args)


def test_vllm_roles_and_the_router_lists_every_instance():
    layout = build_layout(plan([route("P-MD")]), SETTINGS)
    commands = server_commands(layout, "vllm")
    roles = {c.unit: c.args[c.args.index("--kv-transfer-config") + 1] for c in commands}
    assert '"kv_role":"kv_producer"' in roles["p-h800-sxm-tp8"] and '"kv_role":"kv_consumer"' in roles["md-h20-tp8"]
    args = sglang_router_args(layout.routers[0])
    assert args.count("--prefill") == 2 and args.count("--decode") == 3


def test_pairs_of_vendors_without_a_common_kv_path_are_called_out():
    p = plan([route("P-MD")], pools=[{"role": "P", "datacenter": "dc-a", "chip": "Ascend-910B", "tp": 8, "count": 1},
                                     {"role": "MD", "datacenter": "dc-b", "chip": "H20", "tp": 8, "count": 1}])
    files = export_plan(p, "k8s", SETTINGS)
    assert "pairs Huawei and NVIDIA chips" in files["README.md"]
    assert "huawei.com/Ascend910: '8'" in files["dc-a/p-ascend-910b-tp8.yaml"]


def test_a_route_without_its_pool_is_bad_input_naming_it():
    p = plan([route("P-MD", dst="dc-c")])
    with pytest.raises(InputError, match="no deployed MD pool in dc-c"):
        build_layout(p, SETTINGS)
