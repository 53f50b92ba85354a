"""`bench/run.py --smoke`: every measurement of `make bench`, briefly, against Headwater and bare
Starlette (no npm peers). It fails when a measurement breaks, not only when the script crashes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "run.py"), "--smoke", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        stdout, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: the script stops the servers it started
        stdout, stderr = proc.communicate(timeout=60)
        raise AssertionError(f"bench/run.py --smoke took over 240 s: {stderr[-4000:]}") from None
    assert proc.returncode == 0, stderr[-4000:]

    results = json.loads(out.read_text())
    meta = results["meta"]
    assert meta["smoke"] is True and meta["targets"] == ["headwater", "starlette"]
    assert meta["cores"] >= 1 and {"Python", "Node", "Headwater"} <= set(meta["versions"])
    for scenario in ("default", "echo"):
        for conns in ("1", "10", "64"):
            for name in ("headwater", "starlette"):
                row = results["ingest"][scenario][conns][name]["median"]
                assert row["rps"] > 0 and 0 < row["p50_ms"] <= row["p99_ms"] and row["failed"] == 0, row
                assert row["loadgen_cpu"] > 0 and row["target_cpu"] > 0 and row["other_cpu"] >= 0, row
            assert results["ratios"][scenario][conns]["starlette"]["rps"] > 0
        assert results["headwater_backlog"]["64"]["sustained_rps"] > 0
    runner = results["runner"]
    assert runner["bare_node_round_trip"]["p50_ms"] > 0 and runner["pool_run_round_trip"]["p50_ms"] > 0
    hooks = results["webhooks"]
    assert hooks["complete"] and hooks["delivered"] == hooks["events"] and hooks["deliveries_per_s"] > 0
    timers = results["timers"]
    # Ticks that ran within the smoke's 1 s grace: how many is a figure of `make bench`, which a busy
    # machine lowers; here the measurement must work (some ran, none counted twice).
    assert 0 < timers["ticks_run"] <= timers["ticks_expected"] and timers["lateness"]["p50_ms"] > 0
    rss = results["idle_rss"]
    assert rss["rss_with_sources"]["service_mib"] > 0 and rss["rss_with_sources"]["runners_mib"] > 0
    assert rss["rss_after_fill_idle"]["total_mib"] > 0
    assert results["event_summaries"]["get_event_summaries"]["samples"] > 0

    table = stdout
    assert "| 64 | headwater |" in table and "| 64 | starlette |" in table
    assert "timer lateness" in table and "event_summaries" in table and "webhook" in table
