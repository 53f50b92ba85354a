"""The security tests of issue 31 run against the local service and the emulated AWS deployment
(the session's `local_server` and `aws_server`, tests/conftest.py); `server` is each in turn (a test
that takes it runs in both modes)."""

from __future__ import annotations

import pytest

from tests.conftest import BOTH_MODES, Server


@pytest.fixture(params=BOTH_MODES)
def server(request: pytest.FixtureRequest) -> Server:
    return request.getfixturevalue("local_server" if request.param == "local" else "aws_server")
