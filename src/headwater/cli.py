"""The `headwater` command: run the service, and manage accounts and the registry (DECISIONS)."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from headwater.bootstrap import Services, bootstrap
from headwater.domain.errors import HeadwaterError
from headwater.settings import Settings

log = logging.getLogger("headwater")


def _settings(args: argparse.Namespace) -> Settings:
    if getattr(args, "data_dir", None):
        os.environ["HEADWATER_DATA_DIR"] = str(Path(args.data_dir).resolve())
    return Settings()


def _print(args: argparse.Namespace, value: Any, text: str) -> None:
    print(json.dumps(value, indent=None if args.json else 2) if args.json else text)


def registry_fingerprint(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def publish_shipped_registry(services: Services) -> None:
    """Publishes `src/registry` when its files changed since the last start (first start included)."""
    root = services.settings.registry_dir
    if not root.is_dir():
        return
    marker = services.settings.data_dir / "registry.published"
    fingerprint = registry_fingerprint(root)
    if marker.exists() and marker.read_text() == fingerprint:
        return
    results = services.registry.publish_dir(root)
    for r in results:
        log.info("registry %s: %s %s", r.status, r.file, r.key or r.reason or "")
    if all(r.status != "failed" for r in results):
        marker.write_text(fingerprint)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from headwater.api.app import create_app

    settings = _settings(args)
    if args.host:
        settings.host = args.host
    if args.port:
        settings.port = args.port
    services = bootstrap(settings)
    services.start()
    app = create_app(services)
    publish_shipped_registry(services)
    try:
        uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level, access_log=False)
    finally:
        services.close()
    return 0


def cmd_users_create(args: argparse.Namespace) -> int:
    user, key = bootstrap(_settings(args)).accounts.create_user(args.username, args.email, args.tier)
    _print(args, {"id": user.id, "api_key": key}, f"user {user.id}\napi key {key} (shown once)")
    return 0


def cmd_orgs_create(args: argparse.Namespace) -> int:
    org = bootstrap(_settings(args)).accounts.create_org(args.name, args.owner)
    _print(args, dataclasses.asdict(org), f"org {org.id} ({org.orgname})")
    return 0


def cmd_orgs_add_member(args: argparse.Namespace) -> int:
    bootstrap(_settings(args)).accounts.add_member(args.org, args.user)
    _print(args, {"org_id": args.org, "user_id": args.user}, f"{args.user} is a member of {args.org}")
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    key = bootstrap(_settings(args)).accounts.create_key(args.user)
    _print(args, {"api_key": key}, f"api key {key} (shown once)")
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    bootstrap(_settings(args)).accounts.revoke_key(args.key)
    _print(args, {"revoked": True}, "revoked")
    return 0


def cmd_registry_publish(args: argparse.Namespace) -> int:
    services = bootstrap(_settings(args))
    try:
        results = services.registry.publish_dir(Path(args.dir))
    finally:
        services.close()
    rows = [dataclasses.asdict(r) for r in results]
    text = "\n".join(f"{r.status:9} {r.file} {r.key or r.reason or ''}" for r in results)
    _print(args, {"results": rows}, text)
    return 1 if any(r.status == "failed" for r in results) or not results else 0


def cmd_workflows_deploy(args: argparse.Namespace) -> int:
    services = bootstrap(_settings(args))
    try:
        workflow = services.workflows.deploy(args.user, args.org, Path(args.file))
    finally:
        services.close()
    _print(args, {"id": workflow.id, "deployment_id": workflow.deployment_id},
           f"workflow {workflow.id} deployed as {workflow.deployment_id}")
    return 0


def cmd_workflows_list(args: argparse.Namespace) -> int:
    workflows = bootstrap(_settings(args)).workflows.listing(args.user, args.org)
    _print(args, {"data": [w.to_api() for w in workflows]},
           "\n".join(f"{w.id} {w.name} ({w.deployment_id}, {len(w.steps)} steps)" for w in workflows))
    return 0


def cmd_workflows_delete(args: argparse.Namespace) -> int:
    bootstrap(_settings(args)).workflows.delete(args.user, args.workflow)
    _print(args, {"deleted": args.workflow}, f"deleted {args.workflow}")
    return 0


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", help="data directory (default $HEADWATER_DATA_DIR or ./.headwater)")
    common.add_argument("--json", action="store_true", help="print JSON")

    root = argparse.ArgumentParser(prog="headwater", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", parents=[common], help="run the local service")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(func=cmd_serve)

    users = commands.add_parser("users", help="user accounts").add_subparsers(dest="action", required=True)
    create = users.add_parser("create", parents=[common])
    create.add_argument("--username", required=True)
    create.add_argument("--email", required=True)
    create.add_argument("--tier", choices=["free", "paid"], default="free")
    create.set_defaults(func=cmd_users_create)

    orgs = commands.add_parser("orgs", help="organizations").add_subparsers(dest="action", required=True)
    create = orgs.add_parser("create", parents=[common])
    create.add_argument("--name", required=True)
    create.add_argument("--owner", required=True, help="u_ id of the owner")
    create.set_defaults(func=cmd_orgs_create)
    member = orgs.add_parser("add-member", parents=[common])
    member.add_argument("--org", required=True)
    member.add_argument("--user", required=True)
    member.set_defaults(func=cmd_orgs_add_member)

    keys = commands.add_parser("keys", help="API keys").add_subparsers(dest="action", required=True)
    create = keys.add_parser("create", parents=[common])
    create.add_argument("--user", required=True)
    create.set_defaults(func=cmd_keys_create)
    revoke = keys.add_parser("revoke", parents=[common])
    revoke.add_argument("key")
    revoke.set_defaults(func=cmd_keys_revoke)

    registry = commands.add_parser("registry", help="the component registry").add_subparsers(
        dest="action", required=True
    )
    publish = registry.add_parser("publish", parents=[common])
    publish.add_argument("dir", help="a directory of component files")
    publish.set_defaults(func=cmd_registry_publish)

    workflows = commands.add_parser("workflows", help="workflows (YAML files of action steps)").add_subparsers(
        dest="action", required=True
    )
    deploy = workflows.add_parser("deploy", parents=[common])
    deploy.add_argument("file", help="the workflow's YAML file")
    deploy.add_argument("--user", required=True, help="u_ id of the owner")
    deploy.add_argument("--org", help="o_ id of the org to deploy it in")
    deploy.set_defaults(func=cmd_workflows_deploy)
    listing = workflows.add_parser("list", parents=[common])
    listing.add_argument("--user", required=True)
    listing.add_argument("--org")
    listing.set_defaults(func=cmd_workflows_list)
    delete = workflows.add_parser("delete", parents=[common])
    delete.add_argument("workflow", help="p_ id")
    delete.add_argument("--user", required=True)
    delete.set_defaults(func=cmd_workflows_delete)
    return root


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except HeadwaterError as e:
        detail = {"error": e.message, **({"details": e.details} if e.details else {})}
        print(json.dumps(detail) if args.json else f"error: {e.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
