"""template.yaml's security properties (docs/security.md, "AWS deployment"): no secret in any
function's environment (the key of the secret props is a KMS key that only the trusted functions
may use), the runner's role holds nothing but its own logs, and no role may receive, delete or
send on a queue its function does not use (no AWS managed SQS policy, no sqs wildcard)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from headwater.emulated.template import Template, load

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
BASIC_LOGS = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
# What SAM attaches for `Tracing: Active`: X-Ray's write-only actions (segments, telemetry, sampling
# rules), which X-Ray grants only on "*"; no data of the service's.
XRAY_WRITE = "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"
# The queues each consumer polls and each function sends to (what its code uses).
POLLS = {"RunQueueFunction": {"RunQueue", "RunOrderQueue"}, "FanOutFunction": {"FanOutQueue"},
         "WebhookDeliveryFunction": {"WebhookDeliveryQueue"}, "EventDeletionFunction": {"EventDeletionQueue"}}
# Functions whose code decrypts secret props (runs, hooks, updates) or webhook signing secrets,
# and those of them that also encrypt (saving a source's props, creating a webhook).
DECRYPTS = {"SourcesFunction", "HttpIngestFunction", "RunQueueFunction", "WebhooksFunction",
            "WebhookDeliveryFunction", "FallbackFunction", "ComponentsFunction", "OAuthFunction"}
# An OAuth refresh before a run, hook, options or additionalProps call seals the new tokens (issue 22).
ENCRYPTS = {"SourcesFunction", "WebhooksFunction", "FallbackFunction", "OAuthFunction", "ComponentsFunction",
            "HttpIngestFunction", "RunQueueFunction"}


@pytest.fixture(scope="module")
def template() -> Template:
    return Template.read(TEMPLATE)


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    """As `sam deploy` translates it, managed policy ARNs included (what the review found)."""
    from samtranslator.translator.transform import transform

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    body = load(TEMPLATE)
    for resource in body["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://artifacts/code.zip"
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            resource["Properties"]["ContentUri"] = "s3://artifacts/layer.zip"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        parameters = {name: "x" * 43 + "=" for name, p in body.get("Parameters", {}).items() if "Default" not in p}
        return transform(body, parameters, NoManagedPolicies())  # type: ignore[no-any-return]


def _statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for policy in role["Properties"].get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def _roles(translated: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each function's role (SAM's generated one, or the one its `Role` names)."""
    resources = translated["Resources"]
    return {name: resources[r["Properties"]["Role"]["Fn::GetAtt"][0]] for name, r in resources.items()
            if r["Type"] == "AWS::Lambda::Function"}


def test_no_function_environment_holds_a_secret(template: Template) -> None:
    """No variable names a secret, none takes a NoEcho parameter (the old `SecretKey`), and a
    variable about a key names a KMS key (an identifier: using it takes IAM permission)."""
    secret_parameters = {name for name, p in template.body.get("Parameters", {}).items() if p.get("NoEcho")}
    kms_keys = set(template.of_type("AWS::KMS::Key"))
    for function in template.functions().values():
        for name, value in function.environment.items():
            text = json.dumps(value)
            assert not re.search(r"SECRET|PASSWORD|TOKEN|FERNET", name), (function.name, name)
            assert not any(re.search(rf'"{p}"|\$\{{{p}\}}', text) for p in secret_parameters), (function.name, name)
            if "KEY" in name:
                assert value in ({"Fn::GetAtt": [k, "Arn"]} for k in kms_keys), (function.name, name, value)
    assert not secret_parameters, "a NoEcho parameter is a secret handed to CloudFormation"


def test_the_runner_role_can_write_its_own_logs_and_nothing_else(template: Template) -> None:
    role = template.resources["RunnerRole"]["Properties"]
    assert not role.get("ManagedPolicyArns") and not role.get("PermissionsBoundary")
    statements = _statements(template.resources["RunnerRole"])
    assert statements
    for statement in statements:
        assert statement["Effect"] == "Allow"
        assert set(_actions(statement)) <= {"logs:CreateLogStream", "logs:PutLogEvents"}, statement
        assert statement["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:"
                                                    "log-group:/aws/lambda/${AWS::StackName}-tenant-runner:*"}
    assert template.resources["RunnerFunction"]["Properties"]["Role"] == {"Fn::GetAtt": ["RunnerRole", "Arn"]}
    for name in template.resources:  # no policy of another resource adds to it
        if name not in ("RunnerRole", "RunnerFunction"):
            assert "RunnerRole" not in json.dumps(template.resources[name]), f"{name} gives the runner's role more"


def test_no_role_reaches_a_queue_its_function_does_not_use(translated: dict[str, Any]) -> None:
    """No AWS managed policy but basic logging and X-Ray's write-only one (AWSLambdaSQSQueueExecutionRole,
    which SAM attaches for an `SQS` event, receives and deletes on every queue of the account), no sqs:* and no sqs
    action on Resource "*"; each consumer receives and deletes on its own queue only."""
    for function, role in _roles(translated).items():
        managed = role["Properties"].get("ManagedPolicyArns", [])
        assert managed in ([], [BASIC_LOGS, XRAY_WRITE]), (function, managed)
        received: set[str] = set()
        for statement in _statements(role):
            sqs = [a for a in _actions(statement) if a.lower().startswith("sqs:") or a == "*"]
            if not sqs:
                continue
            assert "sqs:*" not in sqs and "*" not in sqs, (function, statement)
            assert statement["Resource"] != "*" and "*" not in json.dumps(statement["Resource"]), (function, statement)
            if "sqs:ReceiveMessage" in sqs or "sqs:DeleteMessage" in sqs:
                received |= set(re.findall(r'"(\w+Queue)"', json.dumps(statement["Resource"])))
        assert received == POLLS.get(function, set()), (function, received)


def test_only_the_trusted_functions_may_use_the_secrets_key(translated: dict[str, Any]) -> None:
    keys = [name for name, r in translated["Resources"].items() if r["Type"] == "AWS::KMS::Key"]
    assert keys == ["SecretsKey"]
    for function, role in _roles(translated).items():
        kms = [s for s in _statements(role) if any(a.startswith("kms:") for a in _actions(s))]
        wanted = ({"kms:Decrypt"} if function in DECRYPTS else set()) | (
            {"kms:GenerateDataKey"} if function in ENCRYPTS else set())
        assert {a for s in kms for a in _actions(s)} == wanted, (function, kms)
        for statement in kms:
            assert statement["Resource"] == {"Fn::GetAtt": ["SecretsKey", "Arn"]}, (function, statement)


def test_the_functions_that_serve_http_sources_can_count_their_tenants_ingest(template: Template,
                                                                              translated: dict[str, Any]) -> None:
    """The ingest budget's counts are items of the resources table updated by the functions that
    answer /http/... (HttpIngestFunction, and FallbackFunction for the paths it catches), and by
    no policy wider than that table (docs/aws.md, Guardrails)."""
    serving = {r.function for r in template.routes() if r.path is None or r.path.startswith("/http/")}
    assert serving == {"HttpIngestFunction", "FallbackFunction"}
    roles = _roles(translated)
    for function in serving:
        updates = [s for s in _statements(roles[function]) if "dynamodb:UpdateItem" in _actions(s)]
        resources = json.dumps([s["Resource"] for s in updates])
        assert "ResourcesTable" in resources, (function, updates)
        assert all(s["Resource"] != "*" for s in updates), (function, updates)
