"""domain.run_records: a run's record is bounded whatever the run did, and masks its secrets."""

from __future__ import annotations

import json

from headwater.domain.commands import RunSource, from_message, message_text
from headwater.domain.http_interface import http_event
from headwater.domain.models import StoredEvent
from headwater.domain.run_records import (
    MAX_IDS_PER_CHANNEL,
    MAX_LOG_BYTES,
    MAX_TRIGGER_BYTES,
    MAX_UNDO_BYTES,
    RunInfo,
    RunRecord,
    make_record,
    secret_values,
    seq_of,
)


def made(info: RunInfo | None = None, **fields: object) -> RunRecord:
    args: dict[str, object] = {"error": None, "not_run": False, "duration_ms": 1.0, "cpu_ms": None, "trigger": {"n": 1},
                               "events": [], "db_writes": {}, "logs": [], "response": None, "ended_ms": 10}
    return make_record(3, info or RunInfo("http"), **{**args, **fields})  # type: ignore[arg-type]


def test_the_id_names_the_seq_and_only_run_ids_parse() -> None:
    record = made()
    assert record.id == "10-3" and seq_of(record.id) == 3
    for bad in ("", "3", "a-3", "3-", "-3", "1-2-3", "1-" + "9" * 19):
        assert seq_of(bad) is None, bad


def test_outcomes() -> None:
    assert made().outcome == "success"
    assert made(error={"code": "X", "message": "m"}).outcome == "error"
    assert made(error={"code": "QUOTA_EXCEEDED", "message": "m"}, not_run=True).outcome == "not_run"
    workflow = RunInfo("subscription", error={"code": "E", "message": "m", "step": "two"})
    assert made(workflow).error == {"code": "E", "message": "m", "stack": "", "step": "two"}


def test_a_trigger_too_large_is_not_kept_nor_rerun() -> None:
    big = {"body": "x" * MAX_TRIGGER_BYTES}
    record = made(trigger=big)
    assert record.trigger is None and not record.trigger_kept and record.trigger_bytes > MAX_TRIGGER_BYTES
    assert not record.rerunnable and made().rerunnable and not made(RunInfo("hook", hook="deploy")).rerunnable


def test_logs_past_the_budget_are_counted_not_kept() -> None:
    line = "y" * 1000
    record = made(logs=[{"level": "log", "message": line, "ts": i} for i in range(100)])
    assert len(record.logs) == MAX_LOG_BYTES // 1000 and record.logs_dropped == 100 - MAX_LOG_BYTES // 1000


def test_emitted_by_channel_with_the_first_ids() -> None:
    events = [StoredEvent(f"1-{i}", 1, {}, {}, "" if i % 2 else "c") for i in range(60)]
    record = made(events=events)
    assert record.emitted[""]["count"] == 30 and len(record.emitted[""]["ids"]) == MAX_IDS_PER_CHANNEL
    assert record.emitted["c"]["ids"][:2] == ["1-0", "1-2"]


def test_db_keys_are_sorted_and_bounded() -> None:
    record = made(db_writes={f"k{i:03}": i for i in range(150)})
    assert record.db_keys_count == 150 and len(record.db_keys_written) == 100
    assert record.db_keys_written[0] == "k000"


def test_secrets_are_masked_in_logs_and_the_error_longest_first() -> None:
    secrets = secret_values([{"$auth": {"oauth_access_token": "abcdef123", "nested": ["abc"]}}, "abcdef", 42, None])
    assert secrets == {"abcdef123", "abcdef"}  # "abc" is too short to mask without masking words
    record = made(RunInfo("http", secrets=secrets), logs=[{"message": "token abcdef123 and abcdef"}],
                  error={"code": "E", "message": "bad abcdef123", "stack": "at abcdef"})
    assert record.logs[0]["message"] == "token [secret] and [secret]"
    assert record.error == {"code": "E", "message": "bad [secret]", "stack": "at [secret]"}


def test_a_record_reads_back_from_its_json() -> None:
    record = made(error={"code": "E", "message": "m"}, logs=[{"message": "hi"}], db_writes={"k": 1})
    assert RunRecord.from_text(record.to_text()) == record
    assert "rerun_of" not in json.loads(record.to_text())  # defaults are left out: a record is stored per run


def test_an_http_body_that_is_its_raw_text_parsed_is_kept_once() -> None:
    big = ["x" * 300, 2.5]
    request = {"method": "POST", "bodyRaw": json.dumps({"a": big}), "body": {"a": big}, "headers": {}}
    stored = made(RunInfo("manual"), trigger=request).to_text(compact=True)
    assert "body" not in json.loads(stored)["trigger"] and RunRecord.from_text(stored).trigger == request
    assert RunRecord.from_text(made(RunInfo("manual"), trigger=request).to_text(compact=True)) == \
        made(RunInfo("manual"), trigger=request)
    assert json.loads(made(RunInfo("manual"), trigger=request).to_text())["trigger"] == request  # SQLite: whole
    for kept in ({"bodyRaw": "a=" + "1" * 300, "body": {"a": "1"}}, {"bodyRaw": "{}", "body": {"x": 1}}, {"body": 1},
                 {"bodyRaw": "[1]", "body": [1]}):
        assert json.loads(made(trigger=kept).to_text(compact=True))["trigger"] == kept
        assert RunRecord.from_text(made(trigger=kept).to_text(compact=True)).trigger == kept


def test_a_requests_body_is_not_stored_twice_and_reads_back_as_it_was_parsed() -> None:
    """An HTTP request's `body` follows from `bodyRaw` and its content type (http_event): the record
    keeps `bodyRaw` alone, and makes `body` again when read; the same text the task row keeps."""
    def request(content_type: str, raw: str) -> dict[str, object]:
        return http_event("POST", "/", [], [("content-type", content_type)] if content_type else [], raw.encode())

    for each in (request("application/json", '{"a": [1, 2.5, "' + "x" * 300 + '"]}'), request("", "[1, 2]"),
                 request("application/x-www-form-urlencoded", "a=1&b=%20"), request("text/plain", '{"a": 1}'),
                 request("application/json", '{"a": NaN}'), request("application/json", r'"\ud800"')):
        command = RunSource("dc_x", each, 1000, "http")
        for text in (made(trigger=each).to_text(), made(trigger=each).to_text(compact=True),
                     made(trigger=each, trigger_text=command.event_json()).to_text()):
            assert "body" not in json.loads(text)["trigger"], text
            assert RunRecord.from_text(text).trigger == each
        assert from_message(json.loads(message_text(command))) == command
        assert "body" not in json.loads(message_text(command))["event"]
    assert "body" in json.loads(message_text(RunSource("dc_x", each, 1000, "manual")))["event"]


def test_the_undo_log_keeps_the_written_keys_values_before_the_run() -> None:
    record = made(db_writes={"a": 2, "b": None, "new": 1}, db={"a": 1, "b": [1], "other": "x"})
    assert record.db_before == {"values": {"a": 1, "b": [1]}, "absent": ["new"]}
    assert RunRecord.from_text(record.to_text()).db_before == record.db_before


def test_a_run_that_writes_nothing_pays_nothing_for_the_undo_log() -> None:
    record = made(db={"a": 1})
    assert record.db_before is None and "db_before" not in record.to_text()


def test_an_undo_log_over_its_bound_says_so_instead() -> None:
    big = "x" * MAX_UNDO_BYTES
    record = made(db_writes={"a": 1}, db={"a": big})
    assert record.db_before == {"incomplete": len(json.dumps({"values": {"a": big}}, separators=(",", ":")))}
