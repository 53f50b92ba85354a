"""The markdown view of a results document (bench/results/latest.json), and the checks that make the
CI smoke fail when a measurement breaks rather than printing a table of zeros."""

from __future__ import annotations

from typing import Any

SCENARIOS = {"default": "HTTP-source ingest, default response", "echo": "customResponse (echo the body)"}


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def contended_rounds(results: dict[str, Any], limit: float = 0.15) -> list[str]:
    """Rounds during which other processes used more than `limit` cores: their figures are suspect."""
    found = []
    for scenario, by_conns in results["ingest"].items():
        for conns, by_target in by_conns.items():
            for name, row in by_target.items():
                for index, shot in enumerate(row["rounds"]):
                    if shot["other_cpu"] > limit:
                        found.append(f"{scenario} c={conns} {name} round {index + 1} ({shot['other_cpu']:.2f})")
    return found


def ingest_tables(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    contended = contended_rounds(results)
    if contended:
        lines += [f"**Other processes used more than 0.15 core during {len(contended)} of the rounds** "
                  f"(the medians damp this, the figures of those rounds are suspect): {'; '.join(contended)}.", ""]
    peers = [t for t in results["meta"]["targets"] if t != "headwater"]
    for scenario, title in SCENARIOS.items():
        lines += [f"### {title}", "",
                  "| c | server | req/s | p50 ms | p99 ms | HW÷this req/s | HW÷this p50 | HW÷this p99 "
                  "| load gen CPU | server CPU | other CPU | busy after s |",
                  "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for conns, by_target in results["ingest"][scenario].items():
            for name in ["headwater", *peers]:
                row = by_target[name]["median"]
                ratio = results["ratios"][scenario][conns].get(name, {})
                lines.append(
                    f"| {conns} | {name} | {row['rps']:,.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} "
                    f"| {_ratio(ratio.get('rps'))} | {_ratio(ratio.get('p50_ms'))} | {_ratio(ratio.get('p99_ms'))} "
                    f"| {row['loadgen_cpu']:.2f} | {row['target_cpu']:.2f} | {row['other_cpu']:.2f} "
                    f"| {row['busy_after_s']:.1f} |")
        lines.append("")
    backlog = results.get("headwater_backlog", {})
    if backlog:
        lines += ["Headwater's default response acknowledges before the run: the runs it queued during a round "
                  "were drained before the next server's round. Acknowledged, then processed:", "",
                  "| c | acked req/s | drain after the round s | acked events processed per s (round + drain) |",
                  "|---:|---:|---:|---:|"]
        for conns, row in backlog.items():
            lines.append(f"| {conns} | {row['acked_rps']:,.0f} | {row['drain_s']:.1f} | {row['sustained_rps']:,.0f} |")
        lines.append("")
    return lines


def platform_table(results: dict[str, Any]) -> list[str]:
    runner, hooks, timers = results["runner"], results["webhooks"], results["timers"]
    half = results.get("webhooks_half_rate")
    rss, summaries, fill = results["idle_rss"], results["event_summaries"], results["fill"]

    def pp(block: dict[str, Any] | None) -> str:
        return "none ran" if block is None else f"{block['p50_ms']:.2f} / {block['p99_ms']:.2f}"

    def mem(block: dict[str, Any]) -> str:
        return f"{block['total_mib']:.0f} MiB ({block['service_mib']:.0f} + {block['runners_mib']:.0f})"

    return [
        "### Platform", "",
        "| figure | p50 / p99 ms, or value |", "|---|---:|",
        f"| bare `node -e` JSON-lines round trip ({runner['calls']} calls) | {pp(runner['bare_node_round_trip'])} |",
        f"| runner pool `ping` round trip | {pp(runner['pool_ping_round_trip'])} |",
        f"| runner pool warm `run` round trip | {pp(runner['pool_run_round_trip'])} |",
        f"| runner pool warm `run` overhead (round trip − the run's own time) | {pp(runner['pool_run_overhead'])} |",
        f"| runner pool cold `run` round trip (an instance not loaded, on a warm worker of its code) "
        f"| {pp(runner['pool_cold_run_round_trip'])} |",
        f"| runner pool `run` that starts a worker (a memory limit no worker has) "
        f"| {pp(runner['pool_worker_start_run_round_trip'])} |",
        f"| emit → webhook delivered ({hooks['delivered']}/{hooks['events']} events, as fast as answered) "
        f"| {pp(hooks['emit_to_webhook'])} |",
        *([f"| emit → webhook delivered ({half['delivered']}/{half['events']} events at {half['rate_per_s']:,} a "
           f"second, half the deliveries per s) | {pp(half['emit_to_webhook'])} |"] if half else []),
        f"| webhook deliveries per s | {hooks['deliveries_per_s']:,.0f} |",
        f"| timer lateness, {timers['sources']:,} sources every {timers['interval_s']} s; of the "
        f"{timers['ticks_expected']:,} ticks due in {timers['window_s']:.0f} s, {timers['ticks_run']:,} ran within "
        f"{timers['grace_s']:.0f} s of its end; {timers['queued_tasks_at_close']:,} tasks queued at its end "
        f"| {pp(timers['lateness'])} |",
        f"| idle RSS (service + runners), one source that ran once | {mem(rss['rss_one_source'])} |",
        f"| idle RSS with {rss['sources']:,} deployed sources | {mem(rss['rss_with_sources'])} |",
        f"| idle RSS minutes later, after {fill['sources']:,} of them got {fill['events_per_source']} events each "
        f"| {mem(rss['rss_after_fill_idle'])} |",
        f"| GET event_summaries, {summaries['sources']:,} sources × {summaries['events_per_source']} events "
        f"(page of {summaries['page_size']}) | {pp(summaries['get_event_summaries'])} |",
        "",
        f"Preparing server b while the other servers started (not benchmark figures, the CPU was shared): "
        f"{rss['sources']:,} deploys in {rss['deploy_s']:.0f} s, {fill['sources'] * fill['events_per_source']:,} "
        f"events through the endpoints (100 emits per request) committed in {fill['fill_s']:.0f} s.",
        "",
    ]


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    head = [
        f"## Headwater side by side ({'smoke' if meta['smoke'] else 'full run'}, {meta['elapsed_s']:.0f} s)", "",
        f"{meta['cores']} cores ({meta['cpu']}); {versions}; load generator {meta['loadgen']}.", "",
        f"Medians of {meta['rounds']} interleaved rounds of {meta['duration_s']:g} s per server and concurrency; "
        "HW÷this: Headwater's figure divided by that server's (req/s above 1, latency below 1: Headwater ahead). "
        "CPU columns are cores busy during the round (1.00 = one core): the load generator, the server's "
        "processes, every other process of the machine. Busy after: how long the server kept working once "
        "the round ended (waited out before the next round).", "",
    ]
    return "\n".join(head + ingest_tables(results) + platform_table(results))


def problems(results: dict[str, Any]) -> list[str]:
    """What is missing or broken in a results document (empty: well-formed)."""
    found: list[str] = []
    for scenario in SCENARIOS:
        for conns in results["meta"]["connections"]:
            for name in results["meta"]["targets"]:
                row = results["ingest"][scenario][str(conns)][name]["median"]
                where = f"ingest {scenario} c={conns} {name}"
                if not row["rps"] > 0 or not 0 < row["p50_ms"] <= row["p99_ms"]:
                    found.append(f"{where}: {row}")
                if row["failed"] and name in ("headwater", "headwater-1p", "starlette"):
                    found.append(f"{where}: {row['failed']} failed requests")
    for key in ("bare_node_round_trip", "pool_ping_round_trip", "pool_run_round_trip", "pool_cold_run_round_trip",
                "pool_worker_start_run_round_trip"):
        if not results["runner"][key]["p50_ms"] > 0:
            found.append(f"runner {key}: {results['runner'][key]}")
    for key in ("webhooks", "webhooks_half_rate"):
        hooks = results.get(key)
        if hooks is not None and (not hooks["complete"] or hooks["delivered"] != hooks["events"]
                                  or not hooks["emit_to_webhook"]["p50_ms"] > 0):
            found.append(f"{key}: {hooks}")
    timers = results["timers"]
    if not timers["ticks_expected"] or not timers["ticks_run"]:
        found.append(f"timers: {timers['ticks_run']} of {timers['ticks_expected']} ticks ran")
    rss = results["idle_rss"]
    if not 0 < rss["rss_one_source"]["total_mib"] <= rss["rss_with_sources"]["total_mib"] * 1.5:
        found.append(f"idle RSS: {rss}")
    if not results["event_summaries"]["get_event_summaries"]["p50_ms"] > 0:
        found.append(f"event_summaries: {results['event_summaries']}")
    return found
