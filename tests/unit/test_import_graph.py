"""The emulator depends on the product, never the reverse: no module of `headwater` outside
`headwater/emulated/` imports `headwater.emulated` (at the top or inside a function). The
aws-emulated deployment is found by its entry point (headwater/deployments.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import headwater

PACKAGE = Path(headwater.__file__).parent
EMULATED = "headwater.emulated"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, package: str) -> Iterator[tuple[int, str]]:
    """Each module `source` imports, with its line: `import a.b`; `from a import b` as a and a.b
    (b may be a module); relative imports resolved against `package`; importlib.import_module or
    __import__ of a literal name."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__"):
                yield node.lineno, node.args[0].value


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    name = module_name(path)
    return imported(path.read_text(), name if path.name == "__init__.py" else name.rpartition(".")[0])


def is_emulated(name: str) -> bool:
    return name == EMULATED or name.startswith(EMULATED + ".")


def product_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if PACKAGE / "emulated" not in p.parents)


def test_the_walk_sees_the_product_and_not_the_emulator() -> None:
    names = {module_name(p) for p in product_modules()}
    assert {"headwater.bootstrap", "headwater.cli.admin", "headwater.entrypoints.aws.runtime"} <= names
    assert not any(is_emulated(n) for n in names)


def test_every_form_of_import_is_seen() -> None:
    source = ("import headwater.emulated.server\n"
              "from headwater.emulated import gateway\n"
              "from headwater import emulated\n"
              "from ..emulated.runner import X\n"
              "from .. import emulated as e\n"
              "def later():\n"
              "    importlib.import_module('headwater.emulated.deployment')\n")
    found = sorted({(line, name) for line, name in imported(source, "headwater.cli") if is_emulated(name)})
    assert found == [(1, "headwater.emulated.server"), (2, "headwater.emulated"), (2, "headwater.emulated.gateway"),
                     (3, "headwater.emulated"), (4, "headwater.emulated.runner"),
                     (4, "headwater.emulated.runner.X"), (5, "headwater.emulated"),
                     (7, "headwater.emulated.deployment")]


def test_the_product_never_imports_the_emulator() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
             for path in product_modules() for line, name in imports_of(path) if is_emulated(name)]
    assert found == []
