"""The end-to-end layer's fixtures: real services on loopback, shared by the session
(`local_server` and `aws_server`, in tests/conftest.py).

`server` is the local service; a module marked `both_modes` runs each of its tests that use it
against the local service and against the emulated AWS deployment (the same HTTP interface, every
request through the Lambda handler template.yaml routes it to, moto behind them)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import BOTH_MODES, Server, User, client_for, new_user


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "server" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_modes"):
        metafunc.parametrize("server", BOTH_MODES, indirect=True)


@pytest.fixture(scope="session")
def server(request: pytest.FixtureRequest) -> Server:
    """The local service, or (parametrized by `both_modes`) the service in each mode in turn."""
    mode = getattr(request, "param", "local")
    return request.getfixturevalue("local_server" if mode == "local" else "aws_server")


@pytest.fixture
def user(server: Server) -> User:
    return new_user(server)


@pytest.fixture
def api(server: Server, user: User) -> Iterator[httpx.Client]:
    """A client of a new free-tier user, for one test."""
    with client_for(server, user.api_key) as client:
        yield client


@pytest.fixture(scope="module")
def paid_api(server: Server) -> Iterator[httpx.Client]:
    """A client of one paid user, for the tests of a module."""
    with client_for(server, new_user(server, tier="paid").api_key) as client:
        yield client
