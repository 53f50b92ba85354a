"""`POST /v1/components/run`: component code run once without deploying it (`headwater run`)."""

from __future__ import annotations

from typing import Any

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.concurrency import run_in_threadpool

from headwater.api.deps import EventsJSON, PrincipalDep, ServicesDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Data, Shape, answers
from headwater.domain.trial_answer import FILL_ORDER, MAX_BYTES, MAX_EMITS, MAX_ERROR_TEXT, MAX_LOGS
from headwater.services.trials import TrialRequest

router = Router(tags=["components"])


class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    component_code: StrictStr = Field(
        description="The component's code (a source or an action; ESM, CommonJS or TypeScript).",
        examples=['export default {name: "hello", version: "1", props: {db: "$.service.db"}, '
                  'run(e) { this.db.set("n", e.n); this.$emit(e, {summary: `n=${e.n}`}) }}'])
    event: Any = Field(None, description="The event `run(event)` gets (an action: `steps.trigger.event`). "
                       "Absent: a timer source gets a timer event, an HTTP source an empty `GET /` request, "
                       "anything else `{}`. For an HTTP source give the request's form: "
                       "`{\"method\": \"POST\", \"body\": {...}}`.", examples=[{"n": 1}])
    configured_props: dict[str, Any] = Field(
        default_factory=dict, description="Prop values by name, validated as a deploy's are.",
        examples=[{"greeting": "hello"}])
    db: dict[str, Any] = Field(default_factory=dict, description="`this.db` as the run starts (default empty).")
    component_file: StrictStr | None = Field(
        None, description="The base name of the file the code came from (letters, digits, `._-`, ending in .js, "
        ".mjs, .cjs, .ts, .mts or .cts): the error's stack names it in place of `component.js`.",
        examples=["my-source.mjs"])
    org_id: StrictStr | None = Field(None, description="Run as the org (its runner process), also a query parameter.")


class RunEmit(Shape):
    event: Any
    metadata: dict[str, Any] = Field(description="What `$emit` was given: `id`, `name`, `summary`, `ts`...")


class RunTruncated(Shape):
    message: str = Field(description="What the answer carries of what the run did, as a sentence.")
    emits: int = Field(description="How many `$emit` calls the run made (`emits` has the first of them).")
    logs: int = Field(description="How many log lines the run wrote (`logs` has the first of them).")
    fields: list[str] = Field(description="Fields answered as null because they did not fit.")


class RunOutcome(Shape):
    type: str = Field(description="`source` or `action`.")
    name: str
    event: Any = Field(description="The event the run got.")
    emits: list[RunEmit] = Field(description="`this.$emit` calls, in order (none is stored).")
    logs: list[dict[str, Any]] = Field(description="Console output: `level`, `message`, `ts`.")
    db_writes: dict[str, Any] = Field(description="Keys `this.db.set` wrote, with their final value.")
    db: dict[str, Any] = Field(description="`this.db` after the run (the given `db` with the writes).")
    db_error: str | None = Field(None, description="Why the writes would not be applied (over the size limit).")
    response: dict[str, Any] | None = Field(description="The first `respond()`: `status`, `headers`, `body`.")
    error: dict[str, Any] | None = Field(description="What the run threw: `code`, `name`, `message`, `stack`.")
    duration_ms: float
    return_value: Any = Field(None, description="Actions: what `run({$})` returned.")
    exports: dict[str, Any] | None = Field(None, description="Actions: `$.export`s, `$summary` included.")
    sends: list[dict[str, Any]] | None = Field(None, description="Actions: `$.send.*` calls (none is sent).")
    flow_exit: dict[str, Any] | None = Field(None, description="Actions: `$.flow.exit(reason)`.")
    truncated: RunTruncated | None = Field(description="What was cut to keep the answer within its bounds (null: "
                                           "nothing).")


RUN_DESCRIPTION = f"""Runs the code once, sandboxed like any run and counted against the caller's daily quota
(an invocation, and the compute of loading the code and running it: 429 past it), and answers what
it did. Nothing is stored (no component, source, event or state) but the usage. A run that throws
still answers 200, with `error`; code that does not load, or props that do not fit, answer 422.

The answer is bounded whatever the run does: at most {MAX_EMITS:,} emits, {MAX_LOGS:,} log lines
and {MAX_BYTES // 1024 // 1024} MB of JSON, `error`'s message and stack cut to {MAX_ERROR_TEXT // 1024} KB each. Past
them it still answers 200, with the first emits and log lines that fit and `truncated` saying what was cut:
how many emits and log lines the run made, and the fields answered as null (the fields are filled
in the order {", ".join(f"`{name}`" for name in FILL_ORDER)}, then the emits, then the log lines;
one that does not fit in what is left is null)."""


@router.post("/components/run", response_class=EventsJSON, description=RUN_DESCRIPTION,
             responses={**answers(Data[RunOutcome]), **error_responses(422, 429, 503)})
async def run_component(body: RunBody, svc: ServicesDep, caller: PrincipalDep,
                        org_id: str | None = Query(None)) -> EventsJSON:
    """Documented by RUN_DESCRIPTION. The run is awaited holding no thread, in a turn of the
    namespace's share of runner calls (503 with `Retry-After` when none comes in time). The
    answer is encoded on a worker thread, not on the event loop: its size is the run's."""
    request = TrialRequest(body.component_code, body.event, body.configured_props, body.db, body.component_file)
    data = await svc.trials.run(caller, request, org_id or body.org_id)
    return await run_in_threadpool(EventsJSON, {"data": data})
