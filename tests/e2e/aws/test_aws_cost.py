"""bench/aws_cost.py on one scenario (an HTTP event with one webhook subscriber): every step of
the event is counted once, and the totals are the sums of their parts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_the_cost_bench_counts_each_step_of_an_http_event_once() -> None:
    proc = subprocess.run([sys.executable, "bench/aws_cost.py", "--scenarios", "http_default", "--events", "2",
                           "--warmup", "1", "--receiver-ms", "0", "--modes", "back_to_back", "--init-ms",
                           '{"HttpIngestFunction": 900, "RunQueueFunction": 500, "RunnerFunction": 250}', "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])["back_to_back"]["http_default"]
    functions, total = result["functions"], result["total"]
    assert functions["HttpIngestFunction"]["invocations"] == 1
    assert functions["HttpIngestFunction"]["api_requests"] == total["api_requests"] == 1
    assert 0 < functions["RunnerFunction"]["invocations"] <= 1  # a FIFO batch's runs: one call
    assert "WebhookDeliveryFunction" not in functions  # the run consumer made the first attempt at once
    for unit in ("invocations", "gb_s", "wru", "rru", "sqs", "sqs_fifo", "kms", "log_bytes", "trace_starts"):
        assert total[unit] == pytest.approx(sum(f[unit] for f in functions.values())), unit
    assert total["wru"] >= 1 and total["rru"] >= 1 and total["gb_s"] > 0
    sent = sum(v for k, v in result["calls"].items() if k.startswith("sqs.SendMessage"))
    assert sent >= 1  # ingest -> run
    assert "FanOutFunction" not in functions  # the run's commit made its delivery itself
    assert result["usd_per_million"] == pytest.approx(sum(result["by_service"].values()), abs=0.05)
    # each invocation's log: at least Lambda's START/END/REPORT lines; the API request's access log line too
    ingest = functions["HttpIngestFunction"]
    assert ingest["log_bytes"] >= 300 + 200
    assert functions["RunnerFunction"]["log_bytes"] >= 250 * functions["RunnerFunction"]["invocations"]
    assert {"logs", "init"} <= set(result["by_service"])
