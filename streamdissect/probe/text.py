"""The text form of the probe and compare reports (JSON is the dicts as they are)."""

from __future__ import annotations


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _table(headers: list[str], rows: list[list]) -> list[str]:
    cells = [headers] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


def _properties(title: str, props: dict | None) -> list[str]:
    lines = [title]
    for key, value in sorted((props or {}).items()):
        lines.append(f"  {key}: {value}")
    return lines


def probe_text(report: dict) -> str:
    lines = [f"broker {report['target']}"]
    tls = report.get("tls")
    if tls:
        lines.append(f"  TLS {tls['version']} {tls['cipher']}, server certificate "
                     f"{tls['peer_subject']}")  # fmt: skip
    lines.append(f"  handshake {_ms(report['handshake_ms'])} ms over "
                 f"{report['connections']} connection(s)")  # fmt: skip
    lines += _properties("server properties", report["server_properties"])
    lines.append(f"SASL mechanisms: {', '.join(report['sasl_mechanisms'])} "
                 f"(used: {report['sasl_mechanism']})")  # fmt: skip
    tune = report["tune"]
    lines.append(
        f"tune: offered frame_max {tune['offered']['frame_max']} heartbeat "
        f"{tune['offered']['heartbeat']} s; accepted frame_max "
        f"{tune['accepted']['frame_max']} heartbeat {tune['accepted']['heartbeat']} s"
    )
    lines += _properties("connection properties", report["connection_properties"])
    versions = report["command_versions"]
    if isinstance(versions, str):
        lines.append(f"command versions: {versions} (the broker has no ExchangeCommandVersions)")
    else:
        lines.append("command versions")
        lines += _table(["command", "key", "min", "max"],
                        [[r["command"], f"0x{r['key']:04x}", r["min_version"], r["max_version"]]
                         for r in versions])  # fmt: skip
    for row in report["streams"]:
        lines.append(f"stream {row['stream']}: {row['code']}, leader {row['leader']}, "
                     f"replicas {', '.join(row['replicas']) or 'none'}")  # fmt: skip
        stats = row["stats"]
        if isinstance(stats, dict):
            lines += [f"  {key}: {value}" for key, value in sorted(stats.items())]
        else:
            lines.append(f"  stats: {stats}")
    lines.append("round trips (ms)")
    lines += _table(["command", "samples", "p50", "max"],
                    [[r["command"], r["samples"], _ms(r["p50"]), _ms(r["max"])]
                     for r in report["rtt_ms"]])  # fmt: skip
    if report["refused"]:
        lines.append(f"refused by the broker (connection closed): {', '.join(report['refused'])}")
    writes = report.get("writes")
    if writes:
        confirm, delivery = writes["confirm_ms"] or {}, writes["delivery_ms"] or {}
        lines.append(f"round trip on {writes['stream']}: {writes['confirmed']}/"
                     f"{writes['messages']} confirmed, {writes['delivered']} delivered; "
                     f"confirm p50 {_ms(confirm.get('p50'))} max {_ms(confirm.get('max'))} ms; "
                     f"delivery p50 {_ms(delivery.get('p50'))} max "
                     f"{_ms(delivery.get('max'))} ms; deleted: "
                     f"{'yes' if writes['deleted'] else 'NO'}")  # fmt: skip
    beats = report["heartbeats"]
    lines.append(f"heartbeats: every {beats['interval_s']} s; sent {beats['sent']}, "
                 f"received {beats['received']}")  # fmt: skip
    return "\n".join(lines) + "\n"


def compare_text(report: dict) -> str:
    server = report["server"]
    captured = server["captured"] or {}
    tune = report["tune"]
    offers = "; ".join(f"frame_max {t['frame_max']} heartbeat {t['heartbeat']}"
                       for t in tune["captured"])  # fmt: skip
    lines = [
        f"capture {', '.join(report['capture'])} against {report['target']}",
        f"  server: captured {captured.get('product')} {captured.get('version')}, "
        + f"live {server['live'].get('product')} {server['live'].get('version')}",
        f"  tune offered: captured {offers}, live frame_max {tune['live']['frame_max']} "
        + f"heartbeat {tune['live']['heartbeat']}",
    ]
    summary = report["summary"]
    lines.append(f"differences: {summary['protocol']} protocol, {summary['server']} server, "
                 f"{summary['state']} state")  # fmt: skip
    if report["differences"]:
        lines += _table(["kind", "command", "field", "captured", "live", "count"],
                        [[d["kind"], d["command"], d["field"], d["captured"], d["live"],
                          d["count"]] for d in report["differences"]])  # fmt: skip
    caps = report["capabilities"]
    live = caps["live_command_versions"]
    lines.append("command versions used in the capture"
                 + (" (the live broker has no ExchangeCommandVersions)" if live == "not supported"
                    else ""))  # fmt: skip
    lines += _table(["command", "used", "captured offer", "live offer", "ok"],
                    [[r["command"], r["used"], r["captured"], r["live"],
                      {True: "yes", False: "NO", None: "?"}[r["ok"]]]
                     for r in caps["used_in_capture"]])  # fmt: skip
    if caps["refused_live"]:
        lines.append(f"refused by the live broker: {', '.join(caps['refused_live'])}")
    lines.append("latency (ms)")
    lines += _table(["command", "captured p50", "live p50", "captured n", "live n"],
                    [[r["command"], _ms(r["captured_p50_ms"]), _ms(r["live_p50_ms"]),
                      r["captured_samples"], r["live_samples"]]
                     for r in report["latency"]])  # fmt: skip
    writes = report.get("writes")
    if writes:
        lines.append(f"round trip on the temporary stream {writes['stream']}: "
                     f"{writes['confirmed']}/{writes['messages']} confirmed, deleted: "
                     f"{'yes' if writes['deleted'] else 'NO'}")  # fmt: skip
    return "\n".join(lines) + "\n"
