"""`headwater workflows deploy|list|delete` with the logged-in key, over the API (DECISIONS Workflows:
`POST /v1/workflows`, `GET /v1/users/me/workflows`, `DELETE /v1/workflows/{id}`): what works against
a remote server. `--user u_... [--data-dir]` is the operator's form, on the store (cli/admin.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.cli.client import COMPONENT_SUFFIXES, api, checked
from headwater.cli.output import Failure, emit

if TYPE_CHECKING:
    import httpx


def read_workflow(file: Path) -> dict[str, Any]:
    """The workflow file as the API takes it: each step's component file (relative to the workflow
    file) sent as its code, registry keys and sc_ ids as they are."""
    import yaml  # here: only the workflow verbs read YAML

    try:
        data = yaml.safe_load(file.read_text())
    except OSError as e:
        raise Failure(f"Cannot read {file}: {e.strerror}.") from None
    except yaml.YAMLError as e:
        raise Failure(f"{file} is not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict):
        raise Failure(f"{file} is not a workflow: a YAML mapping with `name` and `steps`.")
    steps = data.get("steps")
    if isinstance(steps, list):
        data["steps"] = [with_code(file.parent, step) for step in steps]
    return data


def with_code(base: Path, step: Any) -> Any:
    component = step.get("component") if isinstance(step, dict) else None
    if not isinstance(component, str) or not component.endswith(COMPONENT_SUFFIXES):
        return step
    path = (base / component).resolve()
    if not path.is_file():
        raise Failure(f"Step {step.get('name')}: no component file {component} next to the workflow file.")
    return {**{k: v for k, v in step.items() if k != "component"}, "component_code": path.read_text()}


def deploy(file: Path, org: str | None, as_json: bool) -> None:
    body = read_workflow(file)
    with api() as client:
        workflow = checked(client.post("/workflows", json=body, params={"org_id": org} if org else None))["data"]
    emit(as_json, {"id": workflow["id"], "deployment_id": workflow["deployment_id"]},
         f"workflow {workflow['id']} deployed as {workflow['deployment_id']}")


def listing(org: str | None, as_json: bool) -> None:
    with api() as client:
        found = checked(client.get(f"/orgs/{org}/workflows" if org else "/users/me/workflows"))["data"]
    emit(as_json, {"data": found}, "\n".join(
        f"{w['id']} {w['name']} ({w['deployment_id']}, {len(w['steps'])} steps)" for w in found) or "no workflows")


def resolve(client: httpx.Client, workflow: str) -> str:
    """A workflow given by p_ id or by name."""
    if workflow.startswith("p_"):
        return workflow
    matches = [w["id"] for w in checked(client.get("/users/me/workflows"))["data"] if w["name"] == workflow]
    if not matches:
        raise Failure(f"No workflow named {workflow!r}.")
    return str(matches[0])


def delete(workflow: str, as_json: bool) -> None:
    with api() as client:
        workflow_id = resolve(client, workflow)
        checked(client.delete(f"/workflows/{workflow_id}"))
    emit(as_json, {"deleted": workflow_id}, f"deleted {workflow_id}")
