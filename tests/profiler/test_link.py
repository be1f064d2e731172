"""The link probe between two local processes: plain loopback and a shaped 200 Mbit/s line."""

from __future__ import annotations

import json
import threading
import time

import pytest
from typer.testing import CliRunner

from profiler import link
from placer.profiles.records import LinkProfile


def test_loopback_probe_reports_bandwidth_per_stream_and_rtt(link_server):
    result = LinkProfile.model_validate(link.probe(link_server, streams=4, seconds=1.0, rtt_count=10))
    assert result.link_gbit_per_s > 0.2
    assert len(result.per_stream_gbit_per_s) == 4 and all(s > 0 for s in result.per_stream_gbit_per_s)
    assert result.bytes > 0 and result.shaped_gbit_per_s is None
    assert 0 < result.rtt_ms < 100 and len(result.rtt_samples_ms) == 10 and result.jitter_ms >= 0


def test_shaped_link_is_measured_within_ten_percent_of_its_rate(link_server):
    result = link.probe(link_server, streams=4, seconds=2.0, rate_gbit_per_s=0.2, rtt_count=5)
    assert result["shaped_gbit_per_s"] == 0.2
    assert result["link_gbit_per_s"] == pytest.approx(0.2, rel=0.10)


def test_shared_pacer_keeps_several_threads_to_one_rate():
    """Never faster than the rate (plus the burst); on a loaded machine it may lag, a little."""
    rate, burst, chunk = 4e6, 40_000, 10_000
    bucket = link.SharedPacer(rate_bytes_per_s=rate, burst_bytes=burst)
    sent = [0]
    lock = threading.Lock()
    start = time.monotonic()
    deadline = start + 0.6

    def sender():
        while time.monotonic() < deadline:
            bucket.take(chunk)
            with lock:
                sent[0] += chunk

    threads = [threading.Thread(target=sender) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    assert sent[0] <= rate * elapsed + burst
    assert sent[0] >= 0.7 * rate * elapsed


def test_cli_probes_a_peer_and_prints_the_link_profile(cli_app, link_server):
    result = CliRunner().invoke(cli_app, ["profile", "link", "--peer", link_server, "--streams", "2",
                                          "--seconds", "0.5", "--shape-gbit", "0.1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "link" and data["streams"] == 2 and data["peer"] == link_server
    assert data["link_gbit_per_s"] == pytest.approx(0.1, rel=0.25)


@pytest.mark.parametrize("args", [[], ["--listen", "0", "--peer", "127.0.0.1:1"], ["--peer", "no-port"]])
def test_cli_needs_exactly_one_of_listen_or_a_valid_peer(cli_app, args):
    result = CliRunner().invoke(cli_app, ["profile", "link", *args])
    assert result.exit_code == 2
    assert "--listen" in result.output or "HOST:PORT" in result.output


def test_unreachable_peer_is_a_clear_error(cli_app):
    result = CliRunner().invoke(cli_app, ["profile", "link", "--peer", "127.0.0.1:1", "--seconds", "0.2"])
    assert result.exit_code == 2
    assert "127.0.0.1:1" in result.output


@pytest.mark.parametrize("peer, expected", [("10.0.0.2:5201", ("10.0.0.2", 5201)), ("[::1]:80", ("::1", 80))])
def test_parse_peer(peer, expected):
    assert link.parse_peer(peer) == expected


@pytest.mark.parametrize("peer", ["host", "host:0", "host:99999", ":80"])
def test_parse_peer_rejects_bad_values(peer):
    with pytest.raises(ValueError, match="HOST:PORT"):
        link.parse_peer(peer)
