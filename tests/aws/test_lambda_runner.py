"""The runner Lambda's client: a bundle goes by hash until the container says it has not got it,
partials (respond) are handed on at the end, and an over-size payload is refused unsent. The
e2e tests run it against the sandboxed runner in the emulated deployment; here its wire rules."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.adapters.aws.lambda_runner import LambdaRunner
from headwater.ports import Bundle, Instance, RunnerError


class Container:
    """What lambda.mjs answers, as far as bundles and partials go."""

    def __init__(self) -> None:
        self.bundles: set[str] = set()
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any], account: str) -> dict[str, Any]:
        self.requests.append({**request})  # the client re-sends the same dict with the code added
        bundle = request["bundle"]
        if "code" in bundle:
            self.bundles.add(bundle["hash"])
        if bundle["hash"] not in self.bundles:
            return {"ok": False, "error": {"code": "BUNDLE_MISSING", "message": "send the code"}}
        return {"ok": True, "result": {"emits": [], "response": {"status": 201}},
                "partials": [{"partial": "respond", "response": {"status": 201}}]}


def test_a_bundle_is_sent_once_per_container_and_partials_arrive() -> None:
    container = Container()
    runner = LambdaRunner(container)
    bundle = Bundle("h1", "export default {}")
    responded: list[dict[str, Any]] = []
    for _ in range(2):
        runner.run(bundle, Instance("dc_1", {}, account="u_1"), {"n": 1}, 1000, responded.append)
    assert [("code" in r["bundle"]) for r in container.requests] == [False, True, False]
    assert responded == [{"status": 201}, {"status": 201}]


def test_a_request_over_the_invoke_payload_limit_is_refused_unsent() -> None:
    container = Container()
    with pytest.raises(RunnerError) as refused:
        LambdaRunner(container).describe(Bundle("big", "x" * (6 * 1024 * 1024)), 1000)
    assert refused.value.code == "PAYLOAD_TOO_LARGE"
    assert len(container.requests) == 1 and "code" not in container.requests[0]["bundle"]
