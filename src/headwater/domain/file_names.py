"""The file name a component deployed as code is shown under (issue 23, source maps).

Code sent as text has no file name: its bundle names the entry `component.js` (`component.ts`), so
one bundle serves every deploy of the same code. A deploy may give the user's file name
(`component_file`); the stacks of its runs then name that file instead.
"""

from __future__ import annotations

import re

FIELD = "component_file"
ENDINGS = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts")
MAX_LENGTH = 128
_NAME = re.compile(r"[A-Za-z0-9._-]+")
# the bundle's entry as a frame names it, not a package's or a folder's file of that name
_ENTRY = re.compile(r"(?<![\w./@-])component\.(?:js|ts)(?=:\d)")


def problem(name: str) -> str | None:
    """Why `name` is not a file name to show, or None."""
    if not name or len(name) > MAX_LENGTH or not _NAME.fullmatch(name):
        return f"a file's base name: letters, digits, '.', '_' and '-', at most {MAX_LENGTH} characters"
    if not name.endswith(ENDINGS) or name.startswith("."):
        return f"must end with one of {', '.join(ENDINGS)}"
    return None


def shown_stack(stack: str, file_name: str | None) -> str:
    """`stack` with the code's entry named `file_name` (unchanged without one)."""
    if not file_name or not stack:
        return stack
    return _ENTRY.sub(file_name, stack)


def of_path(name: str) -> dict[str, str]:
    """The `component_file` field for code read from a file named `name` (a CLI's), or nothing
    when its name is not one to show."""
    return {} if problem(name) else {FIELD: name}
