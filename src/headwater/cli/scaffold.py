"""`headwater init source|action NAME`: a new component from a template, in the current directory,
that deploys (or runs with `headwater run`) as it is written. An existing file is never replaced."""

from __future__ import annotations

import os
from pathlib import Path

import click

from headwater.cli.output import Failure, emit, handles_errors, json_option
from headwater.domain.slugs import slugify

HTTP_SOURCE = """{imports}export default {open}
  key: "{key}",
  name: "{name}",
  description: "Emits each HTTP request's body; counts the requests in this.db.",
  version: "0.0.1",
  type: "source",
  props: {{
    http: "$.interface.http",
    db: "$.service.db",
  }},
  async run(event{event_type}) {{
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    console.log(`request ${{count}}: ${{event.method}} ${{event.path}}`);
    this.$emit(event.body, {{ summary: `request ${{count}}`, ts: Date.now() }});
  }},
}}{close};
"""

TIMER_SOURCE = """{imports}export default {open}
  key: "{key}",
  name: "{name}",
  description: "Emits on a schedule; counts its runs in this.db.",
  version: "0.0.1",
  type: "source",
  props: {{
    timer: {{
      type: "$.interface.timer",
      default: {{ intervalSeconds: {interval} }},
    }},
    db: "$.service.db",
  }},
  async run(event{event_type}) {{
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    console.log(`run ${{count}}`);
    this.$emit({{ count, timestamp: event.timestamp }}, {{ summary: `run ${{count}}`, id: String(count) }});
  }},
}}{close};
"""

ACTION = """{imports}export default {open}
  key: "{key}",
  name: "{name}",
  description: "Greets someone: a workflow step, or `headwater run` it.",
  version: "0.0.1",
  type: "action",
  props: {{
    who: {{ type: "string", label: "Who", description: "Whom to greet", default: "world", optional: true }},
  }},
  async run({{ $ }}{action_type}) {{
    const greeting = `hello ${{this.who}}`;
    $.export("$summary", greeting);
    return {{ greeting }};
  }},
}}{close};
"""


def render(kind: str, name: str, key: str, interval: int, ts: bool) -> str:
    template = ACTION if kind == "action" else TIMER_SOURCE if kind == "timer" else HTTP_SOURCE
    define = ("defineAction" if kind == "action" else "defineSource") if ts else ""
    return template.format(
        imports=f'import {{ {define} }} from "@pipedream/types";\n\n' if ts else "",
        open=f"{define}({{" if ts else "{", close=")" if ts else "", key=key,
        name=name.replace("\\", "\\\\").replace('"', '\\"'), interval=interval,
        event_type=": any" if ts else "", action_type=": { $: any }" if ts else "")


@click.command("init")
@click.argument("kind", type=click.Choice(["source", "action"]))
@click.argument("name")
@click.option("--http", "trigger", flag_value="http", default=True, help="a source an HTTP request triggers (default)")
@click.option("--timer", "trigger", flag_value="timer", help="a source a timer triggers")
@click.option("--interval", type=click.IntRange(1), default=60, show_default=True, help="the timer's seconds")
@click.option("--ts", is_flag=True, help="TypeScript (NAME.ts) instead of JavaScript (NAME.mjs)")
@click.option("-o", "--output", "output", help="the file to write (default: NAME's slug, in the current directory)")
@json_option
@handles_errors
def init(kind: str, name: str, trigger: str, interval: int, ts: bool, output: str | None, as_json: bool) -> None:
    """Write a new source or action named NAME from a template, ready to deploy or run."""
    key = slugify(name)  # "component" when NAME has no letter or digit
    path = Path(output or f"{key}.{'ts' if ts else 'mjs'}").resolve()
    code = render("action" if kind == "action" else trigger, name, key, interval, ts)
    try:
        # O_EXCL: an existing file is refused, even one that appears between a check and the write.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise Failure(f"{path} exists already: give another NAME or --output (nothing was written).") from None
    except OSError as e:
        raise Failure(f"Cannot write {path}: {e.strerror}.") from None
    with os.fdopen(descriptor, "w") as f:
        f.write(code)
    described = "action" if kind == "action" else f"{trigger} source"
    example = " --event '{\"method\": \"POST\", \"path\": \"/\", \"body\": {\"hello\": 1}}'" \
        if described == "http source" else ""
    then = (f"deploy:  headwater deploy {path.name}   (or `headwater dev {path.name}`: re-deployed on save)"
            if kind == "source" else f"use it:  a workflow step's `component: {path.name}`")
    emit(as_json, {"file": str(path), "kind": kind, "trigger": None if kind == "action" else trigger, "key": key},
         f"wrote {described} {path}\ntry it:  headwater run {path.name}{example}\n{then}")


COMMANDS = [init]
