"""The shapes the API answers with (SPEC: Resources and their fields), for the OpenAPI document.

Routes build their answers as dicts (so `include`/`exclude` can shape them); these models only
document them, and tests/test_openapi_conformance.py checks every answer of the suite against
them. `extra="forbid"` so a field the document does not name is a failure, not a surprise."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Data(Shape, Generic[T]):
    """Non-paginated answers carry the resource in `data`."""

    data: T


class PageInfo(Shape):
    total_count: int
    count: int
    start_cursor: str | None = Field(description="Cursor of the first item; null on an empty page.")
    end_cursor: str | None = Field(description="Cursor of the last item; null on an empty page.")


class Page(Shape, Generic[T]):
    page_info: PageInfo
    data: list[T]


class ConfigurableProp(BaseModel):
    """A prop as the component declares it: `name` and `type`, then whatever settings it gives."""

    model_config = ConfigDict(extra="allow")
    name: str
    type: str


class Component(Shape):
    id: str = Field(description="`sc_` identifier")
    code: str
    code_hash: str
    name: str
    version: str
    key: str | None
    type: str | None = Field(description="`source` or `action`, as the component says.")
    description: str | None
    configurable_props: list[ConfigurableProp]
    component_url: str | None
    component_file: str | None = Field(None, description="The file name the code was sent with: its stacks "
                                       "name it in place of `component.js`.")
    packages: dict[str, str] = Field(
        description="npm packages bundled, by name: the versions its redeploys install again.")
    created_at: int
    updated_at: int


class Source(Shape):
    id: str = Field(description="`dc_` identifier")
    user_id: str | None = Field(None, description="The owner.")
    component_id: str
    configured_props: dict[str, Any] = Field(
        description="Prop values by name: an HTTP interface as `{endpoint_url}`, a timer as "
        "`{cron, interval_seconds}`, secrets masked.")
    active: bool
    created_at: int
    updated_at: int
    name: str
    name_slug: str
    expect_events_within: int | None = Field(
        None, description="Seconds it may go without emitting before it counts as stalled; null: no expectation.")
    catch_up: Literal["skip", "all"] = Field("skip", description="What its timer does with ticks missed while "
                                             "the service was down: `skip` runs once, `all` runs each (bounded).")


class HealthCounts(Shape):
    runs: int = Field(description="Runs of triggers (HTTP requests, timer ticks, manual runs, events routed to it).")
    events: int = Field(description="Events it emitted (not counting `$logs` and `$errors`).")
    errors: int = Field(description="`$errors` events of its runs (not counting stall notices).")
    skipped_ticks: int = Field(description="Timer ticks not run: missed while the service was down (catch-up "
                               "`skip`, or beyond `all`'s bound) or due while the previous run was still going.")


class HealthBucket(HealthCounts):
    start: int = Field(description="The bucket's start (Unix seconds).")


class HealthSeries(Shape):
    five_minutes: list[HealthBucket] = Field(description="The last hour in 12 buckets of 5 minutes, oldest first; "
                                             "the last one is the current one.")
    hours: list[HealthBucket] = Field(description="The last day in 24 hourly buckets, oldest first.")


class SourceHealth(Shape):
    id: str
    active: bool
    last_run_at: int | None = Field(description="When its newest run was committed (Unix seconds); null: never.")
    last_event_at: int | None = Field(description="When it last emitted an event (not `$logs`/`$errors`).")
    last_tick_at: int | None = Field(description="Its timer's newest tick taken (its due time); null: none.")
    next_tick_at: int | None = Field(description="When its timer fires next; null without a timer or while paused.")
    last_hour: HealthCounts
    last_day: HealthCounts
    stalled: bool = Field(description="A timer tick did not run within two intervals, or nothing was emitted "
                          "within `expect_events_within`.")
    stalled_since: int | None = Field(description="When the stall started (Unix seconds); null when not stalled.")
    stalled_why: Literal["timer", "events"] | None = Field(description="What stalled; null when not stalled.")
    skipped_ticks: int = Field(description="Timer ticks not run, since the source was created.")
    expect_events_within: int | None
    catch_up: Literal["skip", "all"]
    series: HealthSeries = Field(description="Runs, events and errors over time, for a chart.")


class EventMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")
    emit_id: str
    name: str = Field(description="The channel: empty for the default one, `$errors`, `$logs`.")
    emitter_id: str


class EventSummary(Shape):
    id: str = Field(description="`<ms>-<seq>`, ordered by emission time.")
    indexed_at_ms: int
    event: Any = Field(description="The event; over 1 KB it may be truncated unless `expand=event`.")
    metadata: EventMetadata


class Org(Shape):
    id: str
    name: str
    orgname: str
    email: str


class User(Shape):
    """The free-tier field set (`daily_*`) or the paid-tier one (`billing_period_*`)."""

    id: str
    username: str
    email: str
    orgs: list[Org]
    daily_compute_time_quota: int | None = None
    daily_compute_time_used: int | None = None
    daily_invocations_quota: int | None = None
    daily_invocations_used: int | None = None
    billing_period_start_ts: int | None = None
    billing_period_end_ts: int | None = None
    billing_period_invocations: int | None = None


class Subscription(Shape):
    id: str = Field(description="`sub_` identifier")
    emitter_id: str
    listener_id: str
    event_name: str


class Webhook(Shape):
    id: str = Field(description="`wh_` identifier")
    user_id: str | None = Field(None, description="In the create response only.")
    signing_secret: str | None = Field(None, description="`whsec_...`, to verify deliveries (Standard "
                                       "Webhooks): in the create response only, never again.")
    name: str | None
    description: str | None
    url: str
    active: bool
    created_at: int
    updated_at: int


class Attempt(Shape):
    at_ms: int
    status: int | None = Field(description="The receiver's status; null when none came.")
    error: str | None
    duration_ms: int


class Delivery(Shape):
    id: str = Field(description="Also the `webhook-id` header, the same on every retry.")
    webhook_id: str
    emitter_id: str
    event_id: str
    status: Literal["pending", "succeeded", "failed", "dead"]
    next_attempt_at: int | None
    created_at_ms: int
    attempts: list[Attempt]


class Step(Shape):
    name: str
    component_id: str


class Workflow(Shape):
    id: str = Field(description="`p_` identifier")
    name: str
    deployment_id: str
    trigger: str | None
    steps: list[Step]
    created_at: int
    updated_at: int


class SearchResult(Shape):
    sources: list[str] = Field(description="Keys of matching sources, best first.")
    actions: list[str] = Field(description="Keys of matching actions, best first.")


class PropOptions(Shape):
    options: list[Any]
    context: Any = Field(None, description="Handed back as `prev_context` for the next page.")


class Health(Shape):
    status: Literal["ok"]


def answers(model: Any, status: int = 200, description: str = "OK") -> dict[int | str, dict[str, Any]]:
    """`responses=` entry documenting a route's success answer with `model`."""
    return {status: {"model": model, "description": description}}


ACCEPTED_EMPTY: dict[int | str, dict[str, Any]] = {202: {"description": "Accepted: the work is queued."}}
