"""`bench/registry_try.py`: its failure classes (the summary's counts rest on them) and its props
comparison against the reference."""

from __future__ import annotations

import pytest

from bench.registry_try import classify, compare_props


@pytest.mark.parametrize(("message", "expected"), [
    ("422 The deploy hook failed: getaddrinfo ENOTFOUND api.example.com", "internet"),
    ("error RUNTIME_ERROR: connect ECONNREFUSED: egress to api.example.com is not allowed", "internet"),
    ("422 options() of channel failed: Request failed with status code 401", "internet"),
    ("422 a package loads a native addon (sharp.node): not supported", "native"),
    ("422 the component runs a program (ffmpeg), which the runner does not have", "native"),
    ("422 npm error code E404 (npm error 404 Not Found - GET .../left-pad-nope)", "package"),
    ("422 The deploy hook failed: TypeError: Cannot read properties of undefined (reading 'map')", "component"),
    ("error RUNTIME_ERROR: ReferenceError: foo is not defined", "component"),
    ("422 options() of bucket failed: Region is missing", "credentials"),
    ("422 options() of board failed: Invalid URL", "credentials"),
    ("422 options() of customer failed: An error occurred with our connection to Stripe.", "internet"),
    ("503 The runner failed: the runner process exited", "headwater"),
    ("500 Internal Server Error", "headwater"),
    ("422 prop \"title\": \"string\" is not a known prop shorthand", "headwater"),
    ('changed-users.js:3:26: Could not resolve "../supersaas.app.js"', "component"),
    ("Error: Access to this API has been restricted. Use --allow-fs-read to manage permissions.", "headwater"),
    ("422 something nobody has seen", "other"),
])
def test_a_failure_is_classed_by_its_message(message: str, expected: str) -> None:
    assert classify(message) == expected


def test_props_differ_by_name_order_type_and_label() -> None:
    described = [{"name": "app", "type": "app", "app": "x"}, {"name": "q", "type": "string", "label": "Query"}]
    assert compare_props(described, [{"name": "app", "type": "app", "label": None},
                                     {"name": "q", "type": "string", "label": "Query"}]) == []
    diffs = compare_props(described, [{"name": "app", "type": "app", "label": None},
                                      {"name": "q", "type": "integer", "label": "Q"}])
    assert diffs == ["q: type 'string' != 'integer'", "q: label 'Query' != 'Q'"]
    assert compare_props(described[:1], [{"name": "q", "type": "string", "label": None}]) == \
        ["names ['app'] != ['q']"]
