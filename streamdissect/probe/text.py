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
