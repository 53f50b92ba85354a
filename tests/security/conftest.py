"""Services for the security tests of issue 31: the local service and the emulated AWS deployment,
one of each for the package; `server` is each in turn (a test that takes it runs in both modes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import BOTH_MODES, Server, running_server


@pytest.fixture(scope="package")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("security-local")) as srv:
        yield srv


@pytest.fixture(scope="package")
def aws_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """template.yaml's settings, HEADWATER_SSE_MAX_S (bounded streams) too."""
    with running_server(tmp_path_factory.mktemp("security-aws"), HEADWATER_BACKEND="aws-emulated") as srv:
        yield srv


@pytest.fixture(params=BOTH_MODES)
def server(request: pytest.FixtureRequest) -> Server:
    return request.getfixturevalue("local_server" if request.param == "local" else "aws_server")
