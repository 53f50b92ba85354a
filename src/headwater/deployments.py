"""Deployments the product finds instead of importing: HEADWATER_BACKEND=aws-emulated is served by
the package its entry point names (group `headwater.deployments`, pyproject.toml), so that package
depends on the product and never the reverse (tests/unit/test_import_graph.py)."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol, cast

from headwater.settings import Settings

GROUP = "headwater.deployments"


class Deployment(Protocol):
    def load_environment(self, data_dir: Path) -> None:
        """What a `headwater` command in another process needs of the deployment serving this data
        dir (its endpoints and settings), put in the environment before the services are built."""

    def serve(self, settings: Settings, log_level: str) -> None:
        """`headwater serve`: the deployment on the settings' host and port, until it is stopped."""


def registered(backend: str) -> Deployment | None:
    """The deployment registered for `backend`, or None when none is (`local`, `aws`)."""
    for entry in entry_points(group=GROUP, name=backend):
        return cast(Deployment, entry.load())
    return None


def deployment(backend: str) -> Deployment:
    found = registered(backend)
    if found is None:
        raise RuntimeError(f"HEADWATER_BACKEND={backend!r}: no deployment is registered under the entry point group "
                           f"{GROUP!r}; install the package again (make setup).")
    return found
