"""`POST /v1/sources/{id}/trial`: a new version tried on the source's recorded traffic (docs/trials.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr
from starlette.concurrency import run_in_threadpool

from headwater.api.deps import EventsJSON, PrincipalDep, ServicesDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Data, Shape, answers
from headwater.domain.trial_diff import MAX_RUNS
from headwater.services.source_trials import DEFAULT_RUNS, MAX_LOG_LINES, SourceTrialRequest

router = Router(tags=["sources"])


class TrialBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    component_code: StrictStr | None = Field(
        None, description="The new version's code. Neither this nor `component_id`: the source's current code "
        "(to try new props).", examples=['export default {name: "s", version: "2", props: {http: "$.interface.http"}, '
                                         'run(e) { this.$emit(e.body, {id: e.body.id}) }}'])
    component_id: StrictStr | None = Field(None, description="A saved component (`sc_...`) to try instead of code.")
    configured_props: dict[str, Any] | None = Field(
        None, description="Props of the new version, validated like a deploy's; absent: the source's own. A secret "
        "sent back as `[secret]` keeps the source's value.")
    runs: StrictInt = Field(DEFAULT_RUNS, description=f"How many of the source's newest runs on record to try, "
                            f"1 to {MAX_RUNS}.")
    component_file: StrictStr | None = Field(None, description="The code's file name, shown in stacks.")


class TrialSide(Shape):
    event: Any
    summary: str | None = None


class EmitAdded(Shape):
    channel: str = Field(description="`\"\"` for the default channel.")
    id: Any = Field(description="The emit's dedupe id (`meta.id`), null when it has none.")
    trial: TrialSide


class EmitRemoved(Shape):
    channel: str
    id: Any
    live: TrialSide
    live_event_id: str | None


class EmitChanged(Shape):
    channel: str
    id: Any
    live: TrialSide
    trial: TrialSide
    live_event_id: str | None


class EmitUnknown(Shape):
    channel: str
    live_event_id: str | None = Field(description="A live event no longer retained (null: past the 20 ids a run's "
                                      "record keeps per channel).")
    trial: TrialSide | None = Field(description="The trial's emit paired with it by order, if any.")


class LiveSide(Shape):
    outcome: str
    error: dict[str, Any] | None
    response_status: int | None
    emitted: dict[str, int] = Field(description="Events the live run stored, by channel ($errors included).")


class TrialRunSide(Shape):
    error: dict[str, Any] | None = Field(description="What the trial run threw (`code`, `message`, `stack`).")
    emitted: int = Field(description="Its `$emit` calls (before dedupe).")
    deduped: list[str] = Field(description="Emits the component's dedupe dropped, the reasons.")
    response_status: int | None
    logs: list[dict[str, Any]] = Field(description=f"Its first {MAX_LOG_LINES} log lines.")
    logs_dropped: int
    db_writes: list[str] = Field(description="`this.db` keys it wrote (not kept: the source's state is untouched).")
    db_error: str | None
    duration_ms: float


class TrialRun(Shape):
    run_id: str = Field(description="The run on record whose input was tried.")
    kind: str
    ended_at_ms: int
    skipped: str | None = Field(description="Why the run was not tried (a hook, an input too large to have been "
                                "kept, a live run refused before its code ran); then nothing else is answered.")
    trigger: Any = Field(None, description="The input both versions got.")
    added: list[EmitAdded] = Field(default_factory=list, description="Emitted by the trial, not by the live run.")
    removed: list[EmitRemoved] = Field(default_factory=list, description="Emitted by the live run, not the trial.")
    changed: list[EmitChanged] = Field(default_factory=list, description="The same emit (channel and dedupe id, or "
                                       "place) with another event or summary.")
    unchanged: int = 0
    unknown: list[EmitUnknown] = Field(default_factory=list, description="Live events that cannot be compared.")
    live: LiveSide | None = None
    trial: TrialRunSide | None = None
    cut: bool | None = Field(None, description="True: past the answer's bound, only counts are answered.")
    added_count: int | None = None
    removed_count: int | None = None
    changed_count: int | None = None


class TrialTotals(Shape):
    added: int
    removed: int
    changed: int
    unchanged: int
    unknown: int
    errors: int = Field(description="Trial runs that threw.")


class TrialAnswer(Shape):
    source_id: str
    name: str
    version: str
    runs_requested: int
    runs_tried: int
    runs_skipped: int
    state_exact: bool = Field(description="Whether the trial started from `this.db` exactly as it was before the "
                              "first run tried (reconstructed from the runs' records).")
    state_note: str | None = Field(description="Why it is not exact, when it is not.")
    totals: TrialTotals
    runs: list[TrialRun] = Field(description="Oldest first.")
    truncated: str | None


TRIAL_DESCRIPTION = f"""Runs a new version of the source (new code, or new props) against the inputs of
its newest `runs` runs on record (1 to {MAX_RUNS}), oldest first, each trial run seeing the `this.db` the
previous left and the first the source's state as it was before the first run tried (`state_exact`
says whether that could be reconstructed exactly). The source is untouched: no event stored or
delivered, no state written, no hook run. It runs in the source's namespace's sandbox under the
same URL policy as any run, each run counted against the caller's quota (429 past it); calls to
real APIs are real. Answers, run by run, what the trial emitted beside what the live version
emitted then: `added`, `removed`, `changed` (matched by channel and dedupe id, else by order).
Secret values never appear (`[secret]`). 404: no such source the caller can see; 409: no run on
record; 422: code that does not load or is not a source, props that do not fit, `runs` out of range."""


@router.post("/sources/{source_id}/trial", response_class=EventsJSON, description=TRIAL_DESCRIPTION,
             responses={**answers(Data[TrialAnswer]), **error_responses(404, 409, 413, 422, 429, 503)})
async def trial_source(source_id: str, body: TrialBody, svc: ServicesDep, caller: PrincipalDep) -> EventsJSON:
    """Documented by TRIAL_DESCRIPTION; the answer is encoded on a worker thread (its size is the runs')."""
    request = SourceTrialRequest(body.component_code, body.component_id, body.configured_props, body.runs,
                                 body.component_file)
    data = await svc.source_trials.trial(caller, source_id, request)
    return await run_in_threadpool(EventsJSON, {"data": data})
