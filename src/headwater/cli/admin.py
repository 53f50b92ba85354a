"""Commands that act on the service's own data (DECISIONS: accounts and workflows have no HTTP
routes): they open the store of `--data-dir` or `HEADWATER_DATA_DIR`, the same one `serve` uses. Workflow
verbs without `--user` go through the API with the logged-in key instead (cli/workflow_client.py)."""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from headwater.cli import workflow_client
from headwater.cli.output import Failure, emit, handles_errors, json_option
from headwater.cli.stopping import STOP_SIGNALS, Stopped, exit_like, stop_on_signals
from headwater.settings import Settings

# The composition root and the services are imported by the commands that use them, not here:
# every `headwater` command imports this module, and most (help, the API client's) never open a store.
if TYPE_CHECKING:
    from headwater.bootstrap import Services
    from headwater.services.registry import PublishResult

log = logging.getLogger("headwater")
F = TypeVar("F", bound=Callable[..., Any])


def data_dir_option(f: F) -> F:
    return click.option("--data-dir", type=click.Path(file_okay=False, resolve_path=True), default=None,
                        help="data directory (default $HEADWATER_DATA_DIR, else ~/.local/share/headwater)")(f)


def settings_for(data_dir: str | None) -> Settings:
    if data_dir:
        os.environ["HEADWATER_DATA_DIR"] = str(Path(data_dir).resolve())
    return Settings()


@contextmanager
def services_for(data_dir: str | None) -> Iterator[Services]:
    from headwater.bootstrap import bootstrap

    services = bootstrap(settings_for(data_dir))
    try:
        yield services
    finally:
        services.close()


@click.command()
@click.option("--host")
@click.option("--port", type=int)
@click.option("--log-level", default="info")
@data_dir_option
def serve(host: str | None, port: int | None, log_level: str, data_dir: str | None) -> None:
    """Run the service."""
    from headwater.bootstrap import bootstrap
    from headwater.cli.serving import inherited_socket, supervise, tell_ready
    from headwater.deployments import registered
    from headwater.services.registry import publish_shipped_registry

    settings = settings_for(data_dir)
    settings.host = host or settings.host
    settings.port = port or settings.port
    stopped_by: Stopped | None = None
    served_elsewhere = registered(settings.backend)  # aws-emulated: its entry point (deployments.py)
    if served_elsewhere is not None:
        with stop_on_signals():
            try:
                served_elsewhere.serve(settings, log_level)
            except Stopped as e:
                stopped_by = e
        exit_like(stopped_by)
        return
    services: Services | None = None
    with stop_on_signals():
        try:
            if settings.processes > 1 and settings.process_index is None:
                supervise(settings, log_level)  # the serving processes, each this command again
                return
            sock = inherited_socket()
            services = bootstrap(settings)
            services.start()
            publishing = ThreadPoolExecutor(1, thread_name_prefix="registry")
            # The shipped registry is published (Node: bundler and runner processes) while this
            # thread imports the HTTP app and builds it (about a second of a core): before either
            # is done, nothing is served.
            published = (publishing.submit(publish_shipped_registry, services.registry, settings)
                         if not settings.process_index else None)  # the first (or only) serving process
            try:
                import uvicorn

                from headwater.api.app import create_app

                app = create_app(services)
                if published is not None:
                    published.result()
            finally:
                publishing.shutdown(wait=False)
            tell_ready()
            quiet_garbage_collector()
            # uvicorn, not Granian: measured side by side, Granian's embedded ASGI server answered 0.59-0.86x
            # uvicorn's requests (docs/performance.md). Open streams (SSE) would hold a graceful shutdown
            # forever: they get a few seconds, then end. It raises the signal that stopped it once
            # it has, so that Stopped comes out of it.
            config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level,
                                    access_log=False, timeout_graceful_shutdown=3)
            server = uvicorn.Server(config)
            server.run(sockets=[sock] if sock is not None else None)
            if not server.started:
                sys.exit(3)  # uvicorn's startup failure (the port taken, say), as uvicorn.run has it
        except Stopped as e:
            stopped_by = e
        finally:
            for sig in STOP_SIGNALS:  # the runners are ended whole, even if the signal comes again
                signal.signal(sig, signal.SIG_IGN)
            if services is not None:
                services.close()
    exit_like(stopped_by)


def quiet_garbage_collector() -> None:
    """What the service loaded at start (modules, the app, caches) lives as long as it does: frozen,
    the collector's full passes stop walking it, and a larger first generation makes passes rarer.
    Under load those passes took about 8% of the event loop's time."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


@click.group()
def users() -> None:
    """User accounts."""


@users.command("create")
@click.option("--username", required=True)
@click.option("--email", required=True)
@click.option("--tier", type=click.Choice(["free", "paid"]), default="free", show_default=True)
@data_dir_option
@json_option
@handles_errors
def users_create(username: str, email: str, tier: str, data_dir: str | None, as_json: bool) -> None:
    """Create a user and print its API key (shown once)."""
    with services_for(data_dir) as services:
        user, key = services.accounts.create_user(username, email, tier)  # type: ignore[arg-type]
    emit(as_json, {"id": user.id, "api_key": key},
         f"user {user.id}\napi key {key} (shown once)\nin {services.settings.data_dir}")


@click.group()
def orgs() -> None:
    """Organizations."""


@orgs.command("create")
@click.option("--name", required=True)
@click.option("--owner", required=True, help="u_ id of the owner")
@data_dir_option
@json_option
@handles_errors
def orgs_create(name: str, owner: str, data_dir: str | None, as_json: bool) -> None:
    with services_for(data_dir) as services:
        org = services.accounts.create_org(name, owner)
    emit(as_json, dataclasses.asdict(org), f"org {org.id} ({org.orgname})")


@orgs.command("add-member")
@click.option("--org", required=True)
@click.option("--user", required=True)
@data_dir_option
@json_option
@handles_errors
def orgs_add_member(org: str, user: str, data_dir: str | None, as_json: bool) -> None:
    with services_for(data_dir) as services:
        services.accounts.add_member(org, user)
    emit(as_json, {"org_id": org, "user_id": user}, f"{user} is a member of {org}")


@click.group()
def keys() -> None:
    """API keys."""


@keys.command("create")
@click.option("--user", required=True)
@data_dir_option
@json_option
@handles_errors
def keys_create(user: str, data_dir: str | None, as_json: bool) -> None:
    with services_for(data_dir) as services:
        key = services.accounts.create_key(user)
    emit(as_json, {"api_key": key}, f"api key {key} (shown once)")


@keys.command("revoke")
@click.argument("key")
@data_dir_option
@json_option
@handles_errors
def keys_revoke(key: str, data_dir: str | None, as_json: bool) -> None:
    with services_for(data_dir) as services:
        services.accounts.revoke_key(key)
    emit(as_json, {"revoked": True}, "revoked")


def publish_with_progress(directory: str, data_dir: str | None, as_json: bool, force: bool = False,
                          retry_failed: bool = False, keep_npm_store: bool = False) -> None:
    """Publishes a folder of components, with a progress bar; exits 1 when one failed (helper
    modules and components without a key are counted apart, not failures). A file published
    before with the same content (services/publish_cache.py) is `unchanged`, unless `force`; one
    that failed with the same content fails again without being tried (`remembered`), unless
    `retry_failed` or `force`. The npm store is removed once done (bundles hold their packages),
    unless `keep_npm_store`."""
    from headwater.services.publish_cache import PublishCache, publisher_version

    with services_for(data_dir) as services:
        files = services.registry.candidates(Path(directory))
        root = Path(directory).resolve()
        cache = PublishCache(services.settings.data_dir / "registry-publish.json", root,
                             publisher_version(services.settings.runner_dir), ignore_records=force,
                             retry_failed=retry_failed)
        results: list[PublishResult] = []
        progressbar: Any = click.progressbar  # its overloads do not type `length=` without items
        with progressbar(length=len(files), label="publishing", file=sys.stderr,
                         hidden=as_json) as bar:
            for result in services.registry.publish_files(root, files, cache):
                results.append(result)
                bar.update(1)
        pruned = keep_npm_store or services.registry.bundler.prune_store()
    rows = [dataclasses.asdict(r) for r in results]
    counts = {status: sum(1 for r in results if r.status == status)
              for status in ("published", "unchanged", "skipped", "helper", "failed")}
    shown = sorted((r for r in results if r.status in ("skipped", "failed")), key=lambda r: (r.status, r.file))
    lines = [f"{r.status:9} {r.file} {r.key or r.reason or ''}" for r in shown]
    remembered = sum(1 for r in results if r.remembered)
    again = f", {remembered} of them as before, not tried again: --retry-failed tries them" if remembered else ""
    summary = (f"{counts['published']} published, {counts['unchanged']} unchanged, {counts['skipped']} skipped,"
               f" {counts['failed']} failed{again}"
               f" ({counts['helper']} helper modules not counted)")
    failures = failure_causes(results)
    causes = [f"{n:5} failed: {cause}" for cause, n in failures.items()]
    kept = [] if pruned else ["the npm store was kept: another bundler was using it"]
    emit(as_json, {"results": rows, **{k: v for k, v in counts.items() if k != "helper"}, "helpers": counts["helper"],
                   "failure_causes": failures, "npm_store_pruned": not keep_npm_store and pruned},
         "\n".join([*lines, *causes, summary, *kept]))
    if counts["failed"]:
        raise SystemExit(1)


def failure_causes(results: list[PublishResult]) -> dict[str, int]:
    """Failures grouped by the first line of their reason, numbers and quoted names stripped."""
    causes: dict[str, int] = {}
    for r in results:
        if r.status == "failed":
            first = (r.reason or "unknown").strip().splitlines()[0] if (r.reason or "").strip() else "unknown"
            text = first.split(": ", 1)[-1] if first.startswith("/") else first
            cause = re.sub(r'"[^"]*"|\d+(\.\d+)*', "_", text)[:160]
            causes[cause] = causes.get(cause, 0) + 1
    return dict(sorted(causes.items(), key=lambda kv: -kv[1]))


@click.group()
def registry() -> None:
    """The component registry."""


@registry.command("publish")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, resolve_path=True))
@data_dir_option
@click.option("--force", is_flag=True, help="publish files whose content did not change too")
@click.option("--retry-failed", is_flag=True, help="try again files that failed and did not change since")
@click.option("--keep-npm-store", is_flag=True, help="keep the npm packages installed for bundling (removed by default:"
              " each bundle holds its own)")
@json_option
@handles_errors
def registry_publish(directory: str, data_dir: str | None, as_json: bool, force: bool, retry_failed: bool,
                     keep_npm_store: bool) -> None:
    """Publish every component under DIRECTORY to the registry (only what changed since the
    last publish of DIRECTORY into this data dir, unless --force; a file that failed and did not
    change fails again without being tried, unless --retry-failed). The npm store is removed
    afterwards (a later publish installs again what it needs), unless --keep-npm-store."""
    publish_with_progress(directory, data_dir, as_json, force, retry_failed, keep_npm_store)


@registry.command("gc")
@data_dir_option
@click.option("--min-age", type=float, default=3600.0, show_default=True,
              help="seconds: a package bundle younger than this is kept (a publish may be writing its component's)")
@click.option("--dry-run", is_flag=True, help="say what would be removed, remove nothing")
@json_option
@handles_errors
def registry_gc(data_dir: str | None, min_age: float, dry_run: bool, as_json: bool) -> None:
    """Remove the package bundles of the shared store that no component bundle references any more."""
    from headwater.adapters.local import package_store

    done = package_store.gc(settings_for(data_dir).data_dir, min_age_s=min_age, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    emit(as_json, {**dataclasses.asdict(done), "dry_run": dry_run},
         f"{verb} {done.removed} package bundles ({done.removed_bytes / 1e6:.1f} MB), kept {done.kept}")


@click.group()
def workflows() -> None:
    """Workflows (YAML files of action steps)."""


@workflows.command("deploy")
@click.argument("file", type=click.Path(dir_okay=False, resolve_path=True))
@click.option("--user", default=None, help="the operator's form: u_ id of the owner, on --data-dir's store "
              "(default: the logged-in key, over the API)")
@click.option("--org", help="o_ id of the org to deploy it in")
@data_dir_option
@json_option
@handles_errors
def workflows_deploy(file: str, user: str | None, org: str | None, data_dir: str | None, as_json: bool) -> None:
    """Deploy a workflow file (a step's component file is sent as its code)."""
    if not Path(file).is_file():
        raise Failure(f"No workflow file {file}.")
    if operator_form(user, data_dir) is None:
        workflow_client.deploy(Path(file), org, as_json)
        return
    with services_for(data_dir) as services:
        workflow = services.workflows.deploy(str(user), org, Path(file))
    emit(as_json, {"id": workflow.id, "deployment_id": workflow.deployment_id},
         f"workflow {workflow.id} deployed as {workflow.deployment_id}")


def operator_form(user: str | None, data_dir: str | None) -> str | None:
    """`--user` (with `--data-dir` or HEADWATER_DATA_DIR) acts on the store; without it, the API."""
    if user is None and data_dir is not None:
        raise Failure("--data-dir acts on the store as an operator: give --user u_... with it "
                      "(or neither, to use the logged-in key).")
    return user


@workflows.command("list")
@click.option("--user", default=None, help="the operator's form (default: the logged-in key)")
@click.option("--org")
@data_dir_option
@json_option
@handles_errors
def workflows_list(user: str | None, org: str | None, data_dir: str | None, as_json: bool) -> None:
    """Your workflows (an org's with --org)."""
    if operator_form(user, data_dir) is None:
        workflow_client.listing(org, as_json)
        return
    with services_for(data_dir) as services:
        found = services.workflows.listing(str(user), org)
    emit(as_json, {"data": [w.to_api() for w in found]},
         "\n".join(f"{w.id} {w.name} ({w.deployment_id}, {len(w.steps)} steps)" for w in found))


@workflows.command("delete")
@click.argument("workflow")
@click.option("--user", default=None, help="the operator's form (default: the logged-in key)")
@data_dir_option
@json_option
@handles_errors
def workflows_delete(workflow: str, user: str | None, data_dir: str | None, as_json: bool) -> None:
    """Delete a workflow (by p_ id, or by name with the logged-in key)."""
    if operator_form(user, data_dir) is None:
        workflow_client.delete(workflow, as_json)
        return
    with services_for(data_dir) as services:
        services.workflows.delete(str(user), workflow)
    emit(as_json, {"deleted": workflow}, f"deleted {workflow}")

COMMANDS = [serve, users, orgs, keys, registry, workflows]
