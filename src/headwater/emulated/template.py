"""template.yaml as the emulator reads it: functions with their handlers, HTTP API routes, SQS
event source mappings (AWS::Lambda::EventSourceMapping), resources, and the intrinsic functions
it uses (Ref, GetAtt, Sub, If)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from headwater.settings import REPO_ROOT

TEMPLATE = REPO_ROOT / "template.yaml"


class _Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short forms: `!Ref X` is {"Ref": "X"}, `!GetAtt A.B` is
    {"Fn::GetAtt": ["A", "B"]}, any other `!Fn x` is {"Fn::Fn": x}."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_Loader.add_multi_constructor("!", _tag)


def load(path: Path = TEMPLATE) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 - our own loader, a SafeLoader


@dataclass(frozen=True)
class Route:
    """An HTTP API route: `path` None is the $default route."""

    function: str
    method: str
    path: str | None

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}" if self.path else "$default"

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if self.path is None or self.method not in ("ANY", method):
            return None
        found = _pattern(self.path).fullmatch(path)
        return found.groupdict() if found else None

    @property
    def specificity(self) -> tuple[int, int, int]:
        """API Gateway prefers the most specific route: no greedy variable, then more literal segments."""
        path = self.path or ""
        segments = path.strip("/").split("/")
        return ("+}" not in path, sum(not s.startswith("{") for s in segments), len(segments))


def _pattern(path: str) -> re.Pattern[str]:
    regex = re.sub(r"\{(\w+)\+\}", r"(?P<\1>.+)", re.escape(path).replace(r"\{", "{").replace(r"\}", "}"))
    return re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", regex))


@dataclass(frozen=True)
class Function:
    name: str
    handler: str
    runtime: str
    timeout: int
    environment: dict[str, Any] = field(default_factory=dict)
    # SQS event source mappings (AWS::Lambda::EventSourceMapping naming it): (queue logical id, batch size)
    queues: tuple[tuple[str, int], ...] = ()


@dataclass
class Template:
    body: dict[str, Any]

    @classmethod
    def read(cls, path: Path = TEMPLATE) -> Template:
        return cls(load(path))

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.body["Resources"]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {name: r for name, r in self.resources.items() if r["Type"] == kind}

    def functions(self) -> dict[str, Function]:
        defaults = self.body.get("Globals", {}).get("Function", {})
        mappings = [m["Properties"] for m in self.of_type("AWS::Lambda::EventSourceMapping").values()]
        out = {}
        for name, resource in self.of_type("AWS::Serverless::Function").items():
            props = resource["Properties"]
            env = {**defaults.get("Environment", {}).get("Variables", {}),
                   **props.get("Environment", {}).get("Variables", {})}
            queues = tuple((m["EventSourceArn"]["Fn::GetAtt"][0], int(m.get("BatchSize", 10)))
                           for m in mappings if m["FunctionName"] == {"Ref": name})
            out[name] = Function(name, props["Handler"], props.get("Runtime", defaults.get("Runtime", "")),
                                 int(props.get("Timeout", defaults.get("Timeout", 3))), env, queues)
        return out

    def schedules(self) -> list[tuple[str, str]]:
        """(function, expression) of every function's own `ScheduleV2` event (the sweep's)."""
        return [(name, event["Properties"]["ScheduleExpression"])
                for name, resource in self.of_type("AWS::Serverless::Function").items()
                for event in resource["Properties"].get("Events", {}).values() if event["Type"] == "ScheduleV2"]

    def routes(self) -> list[Route]:
        """Every HttpApi route, most specific first, the $default route last."""
        routes = []
        for name, resource in self.of_type("AWS::Serverless::Function").items():
            for event in resource["Properties"].get("Events", {}).values():
                if event["Type"] == "HttpApi":
                    props = event.get("Properties") or {}
                    routes.append(Route(name, str(props.get("Method", "ANY")).upper(), props.get("Path")))
        return sorted(routes, key=lambda r: (r.path is None, tuple(-x for x in r.specificity)))

    def parameter_defaults(self) -> dict[str, str]:
        return {name: str(p.get("Default", "")) for name, p in self.body.get("Parameters", {}).items()}
