"""template.yaml, offline: cfn-lint clean, and translated by samtranslator (what `sam deploy`
does first) into resources that match the code: every handler exists, every route of the app
reaches the function of its route group, every queue has a dead-letter queue and a consumer,
the schedules' target and role, and each function's policies reach only its own resources."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from headwater.emulated.template import Template, load

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"

# What each function may reach: the resources its code uses (docs/aws.md, Permissions).
SCOPE: dict[str, set[str]] = {
    "UsersFunction": {"ResourcesTable"},
    "ComponentsFunction": {"ResourcesTable", "RunnerFunction", "BundleBucket", "SecretsKey"},
    "SourcesFunction": {"ResourcesTable", "EventsTable", "RunnerFunction", "RunQueue", "RunOrderQueue",
                        "PayloadBucket", "SecretsKey", "BundleBucket"},
    "EventsFunction": {"ResourcesTable", "EventsTable", "RunQueue", "RunOrderQueue", "FanOutQueue",
                       "EventDeletionQueue", "PayloadBucket"},
    "SubscriptionsFunction": {"ResourcesTable", "FanOutQueue", "WebhookDeliveryQueue"},  # replay: its backfill
    "WebhooksFunction": {"ResourcesTable", "EventsTable", "RunQueue", "RunOrderQueue", "WebhookDeliveryQueue",
                         "PayloadBucket", "SecretsKey"},
    # POST /v1/workflows saves steps' components (bundled, described by the runner); a delete purges events.
    "WorkflowsFunction": {"ResourcesTable", "EventsTable", "RunnerFunction", "BundleBucket", "EventDeletionQueue"},
    "HttpIngestFunction": {"ResourcesTable", "EventsTable", "RunnerFunction", "RunQueue", "RunOrderQueue",
                           "FanOutQueue", "PayloadBucket", "SecretsKey", "BundleBucket"},
    "HealthFunction": {"ResourcesTable"},
    "FallbackFunction": {"ResourcesTable", "EventsTable", "RunnerFunction", "RunQueue", "RunOrderQueue", "FanOutQueue",
                         "WebhookDeliveryQueue", "EventDeletionQueue", "PayloadBucket", "SecretsKey", "BundleBucket"},
    "TimerTickFunction": {"ResourcesTable", "RunQueue", "RunOrderQueue", "PayloadBucket"},  # no idempotency record
    "RunQueueFunction": {"ResourcesTable", "EventsTable", "IdempotencyTable", "RunnerFunction", "RunQueue",
                         "RunOrderQueue", "FanOutQueue", "WebhookDeliveryQueue", "PayloadBucket", "TimerScheduleGroup",
                         "SchedulerRole", "SecretsKey", "BundleBucket"},
    "FanOutFunction": {"ResourcesTable", "EventsTable", "IdempotencyTable", "FanOutQueue", "RunQueue", "RunOrderQueue",
                       "WebhookDeliveryQueue", "PayloadBucket"},
    "WebhookDeliveryFunction": {"ResourcesTable", "EventsTable", "IdempotencyTable", "WebhookDeliveryQueue",
                                "PayloadBucket", "SecretsKey"},
    "EventDeletionFunction": {"ResourcesTable", "EventsTable", "IdempotencyTable", "EventDeletionQueue",
                              "PayloadBucket", "TimerScheduleGroup"},
    # the outbox's sends (any queue, a large body to the payload bucket), the timer chains' items, and
    # the stall checks (a source's state and its SOURCE_STALLED event: docs/health.md)
    "SweepFunction": {"ResourcesTable", "EventsTable", "RunQueue", "RunOrderQueue", "FanOutQueue",
                      "WebhookDeliveryQueue", "EventDeletionQueue", "PayloadBucket"},
    "RunnerFunction": set(),  # its logs only (tests/aws/test_least_privilege.py)
}
CONSUMERS = {"RunQueue": "RunQueueFunction", "RunOrderQueue": "RunQueueFunction", "FanOutQueue": "FanOutFunction",
             "WebhookDeliveryQueue": "WebhookDeliveryFunction", "EventDeletionQueue": "EventDeletionFunction"}


@pytest.fixture(scope="module")
def template() -> Template:
    return Template.read(TEMPLATE)


@pytest.fixture(scope="module")
def translated(monkeypatch_module: pytest.MonkeyPatch) -> dict[str, Any]:
    from samtranslator.translator.transform import transform

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    body = load(TEMPLATE)
    for resource in body["Resources"].values():  # what `sam package` does: code uploaded to S3
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://artifacts/code.zip"
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            resource["Properties"]["ContentUri"] = "s3://artifacts/layer.zip"
    return transform(body, {}, NoManagedPolicies())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")  # a dummy region: nothing is called
        yield mp


def test_cfn_lint_is_clean() -> None:
    proc = subprocess.run([str(Path(sys.executable).parent / "cfn-lint"), str(TEMPLATE)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


SAM = ROOT / ".venv-sam" / "bin" / "sam"


def test_sam_validate_lint_is_clean(tmp_path: Path) -> None:
    """`sam validate --lint`, offline: a dummy region and credentials, no telemetry."""
    assert SAM.exists(), "the SAM CLI is missing: `make test` installs it into .venv-sam"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "SAM_CLI_TELEMETRY": "0"}
    proc = subprocess.run([str(SAM), "validate", "--lint", "--region", "us-east-1", "-t", str(TEMPLATE)],
                          capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0 and "is a valid SAM Template" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_every_handler_exists(template: Template) -> None:
    for function in template.functions().values():
        if function.runtime.startswith("nodejs"):
            # layers/runner/function/index.mjs re-exports the handler of the layer's src/lambda.mjs
            module, _, name = function.handler.rpartition(".")
            shim = (ROOT / "layers" / "runner" / "function" / f"{module}.mjs").read_text()
            layer_module = re.search(r"from '/opt/nodejs/runner/(src/\w+\.mjs)'", shim)
            assert layer_module and re.search(rf"export \{{ {name} \}}", shim), shim
            code = (ROOT / "layers" / "runner" / layer_module.group(1)).read_text()
            assert re.search(rf"export const {name}\b", code), function.handler
            continue
        module, _, name = function.handler.rpartition(".")
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin, function.handler
        tree = ast.parse(Path(spec.origin).read_text())
        assigned = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                    if isinstance(t, ast.Name)}
        assert name in assigned, f"{function.name}: {function.handler} defines no {name}"


def test_every_app_route_reaches_its_route_group(template: Template) -> None:
    """Each /v1 route of the app (no trailing slash) is a route of the function whose handler
    module includes its router; nothing but trailing-slash forms and the site falls to $default."""
    from headwater.api.app import V1_ROUTERS

    routes = template.routes()
    handlers = {f.name: f.handler for f in template.functions().values()}
    for router in V1_ROUTERS:
        for route in router.routes:
            path = "/v1" + route.path  # type: ignore[attr-defined]
            if path.endswith("/"):
                continue
            sample = re.sub(r"\{[^}]+\}", "x1", path)
            method = next(iter(route.methods))  # type: ignore[attr-defined]
            matched = next(r for r in routes if r.path is None or r.match(method, sample) is not None)
            assert matched.path is not None, f"{path} has no route in template.yaml"
            module = handlers[matched.function].rpartition(".")[0]
            spec = importlib.util.find_spec(module)
            assert spec and spec.origin
            router_module = route.endpoint.__module__.rsplit(".", 1)[1]  # type: ignore[attr-defined]
            assert re.search(rf"\b{router_module}\.router\b", Path(spec.origin).read_text()), \
                f"{path} routes to {matched.function}, whose handler does not serve {router_module}"
    assert any(r.path == "/http/{endpoint_id}/{proxy+}" and r.function == "HttpIngestFunction" for r in routes)


def test_translated_routes_and_event_source_mappings(translated: dict[str, Any]) -> None:
    resources = translated["Resources"]
    apis = [r for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Api"]
    assert len(apis) == 1
    paths = apis[0]["Properties"]["Body"]["paths"]
    routed = {r.path or "/$default": r.function for r in Template.read(TEMPLATE).routes()}
    assert set(paths) == set(routed)
    for path, operations in paths.items():
        integration = operations["x-amazon-apigateway-any-method"]["x-amazon-apigateway-integration"]
        assert integration["payloadFormatVersion"] == "2.0", path
        assert f"${{{routed[path]}.Arn}}" in json.dumps(integration["uri"]), path
    assert "/$default" in paths  # the $default route
    mappings = {(m["Properties"]["FunctionName"]["Ref"], m["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]):
                m["Properties"] for m in resources.values() if m["Type"] == "AWS::Lambda::EventSourceMapping"}
    assert set(mappings) == {(function, queue) for queue, function in CONSUMERS.items()}
    for mapping in mappings.values():
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_http_routes_are_throttled_at_the_account_quota_and_tenants_by_their_budget(
        translated: dict[str, Any]) -> None:
    """One stage throttle shared by every tenant's endpoints would let one tenant spend everyone's:
    the /http routes get the account's quota and each tenant its own ingest budget (docs/aws.md)."""
    stages = [r["Properties"] for r in translated["Resources"].values() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    assert len(stages) == 1
    throttle = {"ThrottlingRateLimit": 10000, "ThrottlingBurstLimit": 5000}
    assert stages[0]["RouteSettings"] == {"ANY /http/{endpoint_id}": throttle,
                                          "ANY /http/{endpoint_id}/{proxy+}": throttle}
    assert stages[0]["DefaultRouteSettings"] == {"ThrottlingRateLimit": 100, "ThrottlingBurstLimit": 200}


def test_every_queue_has_a_dead_letter_queue_and_a_consumer(template: Template) -> None:
    queues = template.of_type("AWS::SQS::Queue")
    dead_letters = {q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
                    for q in queues.values() if "RedrivePolicy" in q["Properties"]}
    for name, queue in queues.items():
        if name in dead_letters:
            continue
        assert "RedrivePolicy" in queue["Properties"], f"{name} has no dead-letter queue"
        assert name in CONSUMERS, f"{name} has no consumer"
        consumer = template.functions()[CONSUMERS[name]]
        assert (name, consumer.queues[0][1]) in consumer.queues
        assert int(queue["Properties"]["VisibilityTimeout"]) >= 6 * consumer.timeout


def test_schedules_target_the_timer_function_through_their_own_role(template: Template) -> None:
    functions = template.functions()
    for name in ("RunQueueFunction", "EventDeletionFunction"):
        env = functions[name].environment
        assert env["HEADWATER_TIMER_FUNCTION_ARN"] == {"Fn::GetAtt": ["TimerTickFunction", "Arn"]}
        assert env["HEADWATER_SCHEDULE_GROUP"] == {"Ref": "TimerScheduleGroup"}
    role = template.resources["SchedulerRole"]["Properties"]
    statements = role["Policies"][0]["PolicyDocument"]["Statement"]
    invoke = next(s for s in statements if s["Action"] == "lambda:InvokeFunction")
    assert invoke["Resource"][0] == {"Fn::GetAtt": ["TimerTickFunction", "Arn"]}
    assert functions["TimerTickFunction"].handler.endswith("workers.timer_tick.handler")


def test_each_function_reaches_only_its_own_resources(translated: dict[str, Any]) -> None:
    resources = translated["Resources"]
    logical = set(load(TEMPLATE)["Resources"])
    for function, allowed in SCOPE.items():
        role_name = resources[function]["Properties"]["Role"]["Fn::GetAtt"][0]
        policies = json.dumps(resources[role_name]["Properties"].get("Policies", []))
        reached = {name for name in logical if re.search(rf'"{name}"|\$\{{{name}[}}.]', policies)}
        assert reached <= allowed, f"{function} reaches {sorted(reached - allowed)}"
        for statement in _statements(resources[role_name]):
            assert statement["Resource"] != "*" or statement["Action"] in _ANYWHERE, (function, statement)


_ANYWHERE: list[Any] = []  # no action may be on every resource


def _statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for policy in role["Properties"].get("Policies", []):
        for statement in policy["PolicyDocument"]["Statement"]:
            out.append(statement)
    return out


def test_the_runner_reaches_the_bundles_only_through_the_urls_its_callers_sign(template: Template) -> None:
    """The functions that invoke the runner read and write `bundles/*` (and sign the runner's URLs
    with that); the runner's own role and environment hold nothing of the bucket's."""
    functions = template.functions()
    callers = {name for name, resource in template.of_type("AWS::Serverless::Function").items()
               if "RunnerFunction" in json.dumps(resource["Properties"].get("Policies", []))}
    assert callers == {"ComponentsFunction", "SourcesFunction", "HttpIngestFunction", "FallbackFunction",
                       "RunQueueFunction", "WorkflowsFunction"}
    for name in callers:
        statements = [s for p in template.resources[name]["Properties"]["Policies"] for s in p.get("Statement", [])]
        on_bucket = [s for s in statements if "BundleBucket" in json.dumps(s["Resource"])]
        objects, bucket = {"Fn::Sub": "${BundleBucket.Arn}/bundles/*"}, {"Fn::GetAtt": ["BundleBucket", "Arn"]}
        assert {json.dumps(s["Resource"]) for s in on_bucket} == {json.dumps(objects), json.dumps(bucket)}
        assert {a for s in on_bucket for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])} == {
            "s3:GetObject", "s3:PutObject", "s3:ListBucket"}, name
    assert "BundleBucket" not in json.dumps(template.resources["RunnerRole"])
    assert "Environment" not in template.resources["RunnerFunction"]["Properties"]
    assert functions["SourcesFunction"].environment["HEADWATER_BUNDLE_BUCKET"] == {"Ref": "BundleBucket"}


def test_the_runner_runs_in_tenant_isolation_mode_under_a_name_of_its_own(template: Template,
                                                                          translated: dict[str, Any]) -> None:
    """Lambda's tenant isolation mode on the runner (each invoke names a tenant, an execution
    environment serves one: docs/aws.md "Tenant isolation"), through to the translated function. It
    is set at creation, so the function got a new name with it (a named resource is replaced only
    under a new one), and everything naming the function follows that name."""
    runner = translated["Resources"]["RunnerFunction"]
    assert runner["Type"] == "AWS::Lambda::Function"
    assert runner["Properties"]["TenancyConfig"] == {"TenantIsolationMode": "PER_TENANT"}
    name = "${AWS::StackName}-tenant-runner"
    assert runner["Properties"]["FunctionName"] == {"Fn::Sub": name}
    assert template.functions()["SourcesFunction"].environment["HEADWATER_RUNNER_FUNCTION"] == {"Fn::Sub": name}
    assert template.resources["RunnerLogGroup"]["Properties"]["LogGroupName"] == {"Fn::Sub": f"/aws/lambda/{name}"}
    for unsupported in ("ProvisionedConcurrencyConfig", "FunctionUrlConfig", "SnapStart"):  # not with the mode
        assert unsupported not in template.resources["RunnerFunction"]["Properties"], unsupported


# ---------------------------------------------------------------- guardrails (docs/aws.md, Guardrails)

def _alarms(template: Template) -> list[dict[str, Any]]:
    return [a["Properties"] for a in template.of_type("AWS::CloudWatch::Alarm").values()]


def _alarm_on(template: Template, namespace: str, metric: str, dimension: str, value: Any) -> dict[str, Any] | None:
    return next((a for a in _alarms(template) if a["Namespace"] == namespace and a["MetricName"] == metric
                 and a["Dimensions"] == [{"Name": dimension, "Value": value}]), None)


def test_every_function_has_a_log_group_with_retention_and_alarms_on_errors_and_throttles(template: Template) -> None:
    groups = {json.dumps(g["Properties"]["LogGroupName"]): g["Properties"]
              for g in template.of_type("AWS::Logs::LogGroup").values() if "LogGroupName" in g["Properties"]}
    for name, resource in template.of_type("AWS::Serverless::Function").items():
        fixed = resource["Properties"].get("FunctionName")  # the runner's name is fixed: its log group too
        group_name = {"Fn::Sub": "/aws/lambda/" + (fixed["Fn::Sub"] if fixed else f"${{{name}}}")}
        group = groups.get(json.dumps(group_name))
        assert group is not None, f"{name} has no log group"
        assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name
        for metric in ("Errors", "Throttles"):
            alarm = _alarm_on(template, "AWS/Lambda", metric, "FunctionName", {"Ref": name})
            assert alarm is not None, f"{name} has no alarm on its {metric}"
            assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold", name
    assert template.parameter_defaults()["LogRetentionDays"] == "30"


def test_every_dead_letter_queue_has_an_alarm_on_its_depth(template: Template) -> None:
    queues = template.of_type("AWS::SQS::Queue")
    dead_letters = {q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
                    for q in queues.values() if "RedrivePolicy" in q["Properties"]}
    assert len(dead_letters) == len(queues) // 2
    for name in dead_letters:
        alarm = _alarm_on(template, "AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName",
                          {"Fn::GetAtt": [name, "QueueName"]})
        assert alarm is not None, f"{name} has no alarm on its depth"
        assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold", name


def test_every_alarm_notifies_the_alarm_topic(template: Template) -> None:
    assert _alarms(template)
    for alarm in _alarms(template):
        assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}], alarm["AlarmDescription"]
        assert alarm["TreatMissingData"] == "notBreaching"


def test_every_queue_consumer_has_a_concurrency_limit(template: Template) -> None:
    mappings = template.of_type("AWS::Lambda::EventSourceMapping")
    assert {m["Properties"]["FunctionName"]["Ref"] for m in mappings.values()} == set(CONSUMERS.values())
    for name, mapping in mappings.items():
        function = template.resources[mapping["Properties"]["FunctionName"]["Ref"]]["Properties"]
        maximum = mapping["Properties"].get("ScalingConfig", {}).get("MaximumConcurrency")
        assert (maximum is not None and 2 <= maximum <= 1000) or "ReservedConcurrentExecutions" in function, \
            f"{name}: no ScalingConfig.MaximumConcurrency and no reserved concurrency"


def test_every_python_function_is_traced(template: Template, translated: dict[str, Any]) -> None:
    """Tracing: Active (X-Ray, Powertools Tracer) on every Python function but the event path's,
    which follow EventPathTracing (PassThrough unless asked: at a low rate each of their
    invocations would be a trace, docs/aws.md, Cost); the runner keeps Lambda's PassThrough,
    since its role may write its own logs and nothing else."""
    event_path = {"HttpIngestFunction", "TimerTickFunction", "RunQueueFunction", "FanOutFunction",
                  "WebhookDeliveryFunction", "EventDeletionFunction"}
    assert template.body["Parameters"]["EventPathTracing"]["Default"] == "PassThrough"
    assert template.body["Parameters"]["EventPathTracing"]["AllowedValues"] == ["Active", "PassThrough"]
    for name, function in template.of_type("AWS::Serverless::Function").items():
        config = translated["Resources"][name]["Properties"].get("TracingConfig", {})
        runtime = function["Properties"].get("Runtime", template.body["Globals"]["Function"]["Runtime"])
        expected: Any = "PassThrough" if runtime.startswith("nodejs") else "Active"
        if name in event_path:
            expected = {"Ref": "EventPathTracing"}
        assert config.get("Mode") == expected, (name, config)
