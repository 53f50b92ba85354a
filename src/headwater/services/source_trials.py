"""A new version tried on a source's recorded traffic (`POST /v1/sources/{id}/trial`, docs/trials.md).

The new code (or the source's code with new props) runs against the inputs of the source's last N
runs on record, oldest first, each run seeing the `this.db` the trial's previous runs left, the first
the state as it was before the first of them (domain.trial_diff.state_before, from the records'
undo logs). It runs like `POST /v1/components/run` (services/trials.py): in the source's
namespace's runner process, billed to the caller, sandboxed and under the same URL policy as any
run. Nothing of the source changes: no event is stored, nothing delivered, no state written, no
hook run. The answer says run by run what the trial emitted beside what the live version emitted
then; every string in it has the props' secret values masked.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from headwater.domain.connected_accounts import reference
from headwater.domain.errors import Conflict, Invalid
from headwater.domain.events import Emit, dedupe, order_by_ts
from headwater.domain.models import Principal, Source
from headwater.domain.pagination import PageRequest
from headwater.domain.run_records import RUNS_KEPT, RunRecord, masked
from headwater.domain.runs import ERRORS, LOGS, RunResult, apply_db
from headwater.domain.trial_answer import MAX_BYTES, MAX_EMITS, size
from headwater.domain.trial_diff import MAX_RUNS, TRIAL_KINDS, Emitted, StateBefore, diff, state_before
from headwater.ports import Offload, Secrets, UnitOfWorkFactory
from headwater.services import props as prop_forms
from headwater.services.components import Components
from headwater.services.run_records import _is_tick as is_tick
from headwater.services.sources import Sources
from headwater.services.trials import Prepared, TrialRequest, Trials
from headwater.settings import Settings

DEFAULT_RUNS = 10
MAX_LOG_LINES = 50  # of one trial run, in the answer
_ROOM = 64 * 1024  # the answer's own fields


@dataclass(frozen=True)
class SourceTrialRequest:
    component_code: str | None = None
    component_id: str | None = None
    configured_props: dict[str, Any] | None = None  # None: the source's own (its secrets kept)
    runs: int = DEFAULT_RUNS
    component_file: str | None = None


@dataclass(frozen=True)
class _Read:
    source: Source
    code: str
    props: dict[str, Any]
    secrets: frozenset[str]  # the source's own, masked too
    window: list[RunRecord]  # oldest first
    live: dict[int, list[Emitted]]  # by seq
    before: StateBefore


@dataclass
class _Trial:
    """What a trial carries from run to run: its own `this.db` and dedupe cache (from empty,
    docs/trials.md), and the answers so far."""

    db: dict[str, Any]
    seen: dict[str, Any]
    answers: list[dict[str, Any]]


class SourceTrials:
    def __init__(self, uow: UnitOfWorkFactory, sources: Sources, components: Components, trials: Trials,
                 secrets: Secrets, offload: Offload, settings: Settings) -> None:
        self.uow = uow
        self.sources = sources
        self.components = components
        self.trials = trials
        self.secrets = secrets
        self.offload = offload
        self.settings = settings

    async def trial(self, principal: Principal, source_id: str, req: SourceTrialRequest) -> dict[str, Any]:
        read = await self.offload.call(lambda: self._read(principal, source_id, req))
        ready = await self.trials.prepare(
            principal, TrialRequest(read.code, None, read.props, {}, req.component_file), read.source.namespace)
        if ready.definition.type != "source":
            raise Invalid(f"The code is an {ready.definition.type}, not a source.",
                          {"component_code": ["not a source"]})
        trial = _Trial(dict(read.before.db), {}, [])
        for record in read.window:
            skipped = _skipped(record)
            if skipped:
                trial.answers.append({**_head(record), "skipped": skipped})
                continue
            timer = record.kind == "timer" or (record.kind in ("rerun", "manual") and is_tick(record.trigger))
            result = await self.trials.run_prepared(ready, record.trigger, timer, trial.db)
            # its size is the run's: off the event loop
            await self.offload.call(partial(self._took, trial, ready, record, result, read.live[record.seq]))
        return await self.offload.call(lambda: masked(self._answer(read, ready, req, trial.answers),
                                                      read.secrets | ready.secrets))

    def _took(self, trial: _Trial, ready: Prepared, record: RunRecord, result: RunResult,
              live: list[Emitted]) -> None:
        """One trial run's writes applied to the trial's own `this.db`, its emits deduped on its own
        cache, and its answer beside the live run's."""
        trial.db, db_error = apply_db(trial.db, result.db_writes, self.settings.db_max_bytes)
        deduped = dedupe(ready.definition.dedupe, trial.seen, order_by_ts(result.emits))
        trial.seen = deduped.state
        trial.answers.append(_run_answer(record, result, deduped.kept, deduped.refused, live, db_error))

    def _read(self, principal: Principal, source_id: str, req: SourceTrialRequest) -> _Read:
        """The source (NotFound unless the caller may see it), the code and props to try, the
        window of runs with what the live runs emitted, and `this.db` before the first."""
        if isinstance(req.runs, bool) or not 1 <= req.runs <= MAX_RUNS:
            raise Invalid(f"`runs` is how many of the newest runs on record to try: 1 to {MAX_RUNS}.",
                          {"runs": [f"must be 1 to {MAX_RUNS}"]})
        source = self.sources.get(principal, source_id)
        code = self._code(principal, source, req)
        stored = source.configured_props
        plain = prop_forms.for_runner(stored, self.secrets)
        props = plain if req.configured_props is None else prop_forms.unmask(req.configured_props, stored,
                                                                               self.secrets)
        secrets = self.sources.runs.secrets_of(source, self._masked_forms(plain))
        with self.uow(readonly=True) as uow:
            state = uow.state.get(source_id)  # first: records newer than it are left out
            floor = max(1, state.runs - RUNS_KEPT + 1)
            newest = uow.runs.list(source_id, PageRequest(limit=MAX_RUNS), floor).items
            newest = [r for r in newest if r.seq <= state.runs]
            window = list(reversed(newest[:req.runs]))
            if not window:
                raise Conflict(f"Source {source_id} has no runs on record to try the code on: run it first "
                               "(or try it once with POST /v1/components/run).")
            live = {r.seq: _live(uow, source_id, r) for r in window if not _skipped(r)}
        first = window[0].seq
        return _Read(source, code, props, secrets, window, live, state_before(state.db, newest, first, state.runs,
                                                                              state.db_outside_runs))

    def _masked_forms(self, plain: dict[str, Any]) -> dict[str, Any]:
        """The source's props with each account reference as the account's credentials, to mask
        them where its live runs put them (the live events); not handed to any code."""
        connected = self.sources.runs.connected
        return {name: {"$auth": connected.values_to_mask(account_id)}
                if (account_id := reference(value)) is not None else value for name, value in plain.items()}

    def _code(self, principal: Principal, source: Source, req: SourceTrialRequest) -> str:
        if req.component_code is not None and req.component_id is not None:
            raise Invalid("Give `component_code` or `component_id`, not both.",
                          {"component_id": ["give component_code or component_id"]})
        if req.component_id is not None:
            component = self.components.get(principal, req.component_id)
            self.components.check_usable_in(principal, component, source.namespace)
            return component.code
        if req.component_code is not None:
            return req.component_code
        return self.components.by_id(source.component_id).code  # new props on the current code

    def _answer(self, read: _Read, ready: Prepared, req: SourceTrialRequest,
                runs: list[dict[str, Any]]) -> dict[str, Any]:
        tried = [r for r in runs if not r.get("skipped")]
        totals = {name: sum(len(r[name]) for r in tried) for name in ("added", "removed", "changed", "unknown")}
        totals["unchanged"] = sum(r["unchanged"] for r in tried)
        totals["errors"] = sum(1 for r in tried if r["trial"]["error"])
        kept, cut = _within(runs)
        return {
            "source_id": read.source.id,
            "name": ready.definition.name,
            "version": ready.definition.version,
            "runs_requested": req.runs,
            "runs_tried": len(tried),
            "runs_skipped": len(runs) - len(tried),
            "state_exact": read.before.exact,
            "state_note": read.before.reason,
            "totals": totals,
            "runs": kept,
            "truncated": None if not cut else (
                f"The answer is cut to {MAX_BYTES // (1024 * 1024)} MB: the {cut} newest runs carry only their "
                "counts (`cut`: true)."),
        }


def _skipped(record: RunRecord) -> str | None:
    if record.kind == "hook":
        return f"a {record.hook} hook: hooks are not run by a trial"
    if not record.trigger_kept:
        return f"its input ({record.trigger_bytes} bytes) was too large to keep"
    if record.outcome == "not_run":
        return "the live run was refused before its code ran (" + str((record.error or {}).get("code")) + ")"
    if record.kind not in TRIAL_KINDS:
        return f"a run of kind {record.kind}"
    return None


def _head(record: RunRecord) -> dict[str, Any]:
    return {"run_id": record.id, "kind": record.kind, "ended_at_ms": record.ended_ms}


def _live(uow: Any, source_id: str, record: RunRecord) -> list[Emitted]:
    """What the live run stored, by channel (not `$errors`/`$logs`): the retained events among the
    ids its record keeps, the others as unknown (no longer retained, or past the ids kept)."""
    out: list[Emitted] = []
    for channel, entry in record.emitted.items():
        if channel in (ERRORS, LOGS):
            continue
        for event_id in entry["ids"]:
            event = uow.events.get(source_id, channel, event_id)
            if event is None:
                out.append(Emitted(channel, None, None, event_id=event_id, known=False))
            else:
                out.append(Emitted(channel, event.metadata.get("id"), event.event, event.metadata.get("summary"),
                                   event_id))
        out += [Emitted(channel, None, None, known=False)] * (entry["count"] - len(entry["ids"]))
    return out


def _run_answer(record: RunRecord, result: RunResult, kept: list[Emit], refused: list[str],
                live: list[Emitted], db_error: str | None) -> dict[str, Any]:
    summary = [e.meta.get("summary") for e in kept]
    trial = [Emitted(e.channel, e.meta.get("id"), e.event, s if isinstance(s, str) else None)
             for e, s in zip(kept[:MAX_EMITS], summary, strict=False)]
    compared = diff(trial, live).as_dict()
    return {
        **_head(record),
        "skipped": None,
        "trigger": record.trigger,
        **compared,
        "live": {"outcome": record.outcome, "error": record.error, "response_status": record.response_status,
                 "emitted": {ch: e["count"] for ch, e in record.emitted.items() if ch != LOGS}},
        "trial": {"error": result.error, "emitted": len(result.emits), "deduped": refused[:MAX_LOG_LINES],
                  "response_status": (result.response or {}).get("status") if result.response else None,
                  "logs": result.logs[:MAX_LOG_LINES], "logs_dropped": max(0, len(result.logs) - MAX_LOG_LINES),
                  "db_writes": sorted(result.db_writes), "db_error": db_error,
                  "duration_ms": round(result.duration_ms, 3)},
    }


def _within(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The runs within MAX_BYTES, oldest kept whole first; the others with their counts only."""
    left, cut, kept = MAX_BYTES - _ROOM, 0, []
    for run in runs:
        needed = size(run) + 1
        if needed <= left:
            kept.append(run)
            left -= needed
            continue
        cut += 1
        counts = {**run, "cut": True, "trigger": None, "added": [], "removed": [], "changed": [], "unknown": []}
        if isinstance(run.get("trial"), dict):
            counts["trial"] = {**run["trial"], "logs": [], "error": _short(run["trial"].get("error"))}
        counts.update({f"{name}_count": len(run.get(name) or []) for name in ("added", "removed", "changed")})
        left -= size(counts) + 1
        kept.append(counts)
    return kept, cut


def _short(error: Any) -> Any:
    if not isinstance(error, dict):
        return error
    return {"code": error.get("code"), "message": str(error.get("message") or "")[:1024]}
