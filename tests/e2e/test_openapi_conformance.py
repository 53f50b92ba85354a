"""The OpenAPI document is complete and true: every success answer has a schema, and the suite's
own traffic conforms to it (tests/openapi_conformance.py checks each answer as it arrives)."""

from __future__ import annotations

from datetime import timedelta

import httpx

from tests.conftest import Server, conformance


def test_every_success_answer_is_documented_with_a_schema(server: Server) -> None:
    document = httpx.get(server.base_url + "/openapi.json").json()
    missing = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            successes = {code: r for code, r in operation["responses"].items() if code.startswith("2")}
            assert successes, f"{method.upper()} {path} documents no success"
            for code, response in successes.items():
                if code in ("202", "204") and "content" not in response:
                    continue  # an empty answer, documented as such
                schemas = [media.get("schema") for media in response.get("content", {}).values()]
                if not schemas or not all(schemas):
                    missing.append(f"{method.upper()} {path} {code}")
            if path.startswith("/v1/"):
                assert operation.get("security") == [{"bearer": []}], f"{method.upper()} {path}"
    assert missing == []
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": document["components"]["securitySchemes"]["bearer"]
        ["description"]}


def answer(status: int, body: object, url: str) -> httpx.Response:
    response = httpx.Response(status, json=body, request=httpx.Request("GET", url))
    response.elapsed = timedelta(0)
    return response


def test_the_check_fails_an_answer_the_document_does_not_admit(server: Server) -> None:
    """The suite-wide check is not a no-op: a wrong body, an undocumented status and an unknown
    operation are each reported."""
    check = conformance(server)
    url = server.base_url + "/v1/users/me"
    wrong_body = answer(200, {"data": {"id": 7}}, url)
    assert any("violates schema" in p for p in check.problems(wrong_body))
    teapot = answer(418, {"error": "no"}, url)
    assert check.problems(teapot) == ["GET /v1/users/me -> 418: status not documented for GET /v1/users/me"]
    unknown = answer(200, {}, server.base_url + "/v1/nowhere")
    assert check.problems(unknown) == ["GET /v1/nowhere -> 200: the document has no such operation"]
    fine = answer(401, {"error": "The API key is not valid."}, url)
    assert check.problems(fine) == []
