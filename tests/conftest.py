"""What more than one test module shares: the markers of what a test needs beyond
`pip install -e '.[test]'` (and the skip, with its reason, when that is missing), the real
capture made worse, the captures recorded here, the Spark session, the slow consumer's report
and the Wireshark plugin.

Markers (pyproject.toml) come from the fixtures a test uses (NEEDS_BY_FIXTURE) and from short
tables of modules and tests (NEEDS, SLOW_TESTS); a single test may carry its own mark.
A marked test whose resource is missing is skipped with the reason, or fails under
`--require-resources` (scripts/test.sh, which installs them all); a test that skips without a
marker saying it may fails: `pytest -m "not broker and not spark and not browser and not live
and not tshark"` runs, and skips nothing, where only the package and its test extras are.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import pytest
import worsen
from frame_rows import Row, frame_rows
from reportlib import SLOW, ReportPage, figures_kept, make_report

from streamdissect.engine.dissect import Dissector

# the walk_mode fixture (both walks of the Stream fast path: native_modes.py)
pytest_plugins = ["native_modes"]

RESOURCES = ("broker", "spark", "browser", "live", "tshark")
BROKER_PORTS = (5552, 5553, 5551, 5554)  # 3.10, 4.0, and their TLS listeners

# What a test needs, by a fixture it uses (directly or through another fixture)
NEEDS_BY_FIXTURE = {
    "big_capture": ("broker", "live"),
    "over_limit_capture": ("broker", "live"),  # test_rotated.py
    "batch_capture": ("broker", "live"),  # test_scapy_broker.py
    "concurrent_capture": ("broker", "live"),  # test_wireshark_concurrent.py
    "spark": ("spark",),
    "spark_command": ("spark",),
    "plugin": ("tshark",),
}
# What a test needs that no fixture says: "module" (every test of it) or "module::test"
# (every parametrisation of the test); NEEDS_NOTHING, the tests of such a module that don't.
NEEDS = {
    "test_brokers.py": ("broker",),
    "test_compare.py": ("broker",),
    "test_probe.py": ("broker",),
    "test_probe.py::test_pcap_reads_back_like_a_tcpdump_capture_of_the_same_session": ("live",),
    "test_scapy_broker.py": ("broker",),
    "test_scapy_broker.py::test_live_sniff_on_lo_decodes_the_conversation": ("live",),
    "test_cli_live.py": ("broker", "live"),
    "test_live_load.py": ("broker", "live"),
    "test_spark_job.py": ("spark",),
    "test_notebooks.py::test_spark_archive_reads_an_archive_with_the_data_source": ("spark",),
    "test_report_browser.py": ("browser",),
    "test_wireshark.py": ("tshark",),
    "test_wireshark_hostile.py": ("tshark",),
    "test_wireshark_table.py::test_a_command_added_to_the_table_reaches_the_plugin": ("tshark",),
    # editcap (Wireshark's) writes the pcapng copies
    "test_bulk_engine.py::test_other_link_layers_and_formats_same_as_stream": ("tshark",),
    "test_capture.py::test_pcapng_and_gzip_copies_read_the_same": ("tshark",),
    "test_cli_daily.py::test_standard_input_equals_the_file": ("tshark",),
    "test_frame_batches.py::test_pcapng_gzip_and_rotated_sets_give_the_same_frames": ("tshark",),
    "test_framing_worsened.py::test_pcapng_and_gzip_copies_give_identical_output": ("tshark",),
}
NEEDS_NOTHING = {
    "test_compare.py::test_there_are_4_0_captures",
    "test_probe.py::test_uri_parts_and_display_without_password",
    "test_probe.py::test_bad_uri_is_a_usage_error_that_does_not_repeat_the_password",
    "test_probe.py::test_closed_port_fails_at_connect_within_the_timeout",
    "test_cli_live.py::test_sources_are_files_or_an_interface",
}
# The tests of more than about 10 s (measured on 2 cores, the machine otherwise idle)
SLOW_TESTS = {
    "test_live_load.py::test_an_analysis_that_falls_behind_counts_what_the_kernel_dropped",
    "test_spark_faults.py::test_a_killed_executor_loses_no_row",
    "test_probe.py::test_a_broker_restarted_mid_round_trip_is_reported_and_the_stream_deleted",
    "test_fuzz.py::test_short_campaign_finds_nothing",
    "test_notebooks.py::test_spark_archive_reads_an_archive_with_the_data_source",
    "test_report_figures.py::test_three_million_rows_are_drawn_as_a_few_thousand_points",
    "test_report_figures.py::test_the_html_report_of_three_million_rows_stays_small",
    "test_spark_job.py::test_spark_submit_runs_the_job",
    "test_spark_source.py::test_a_standalone_cluster_reads_what_local_spark_reads",
    "test_spark_source.py::test_frames_equal_the_core_batches_file_by_file",
}


def pytest_addoption(parser):
    parser.addoption(
        "--require-resources",
        action="store_true",
        help="a test whose broker, Spark, browser, live capture or tshark is missing fails "
        "instead of being skipped (scripts/test.sh, which installs them all)",
    )


def needs(item: pytest.Item) -> set[str]:
    """The markers the tables give a test."""
    test = f"{item.path.name}::{item.originalname}"
    found = {m for name in item.fixturenames for m in NEEDS_BY_FIXTURE.get(name, ())}
    if test not in NEEDS_NOTHING:
        found.update(NEEDS.get(item.path.name, ()))
    if test in SLOW_TESTS:
        found.add("slow")
    return found | set(NEEDS.get(test, ()))


def gone(items: list[pytest.Item]) -> list[str]:
    """The tables' tests that their module, collected, no longer has (renamed, deleted)."""
    modules = {item.path.name: item.module for item in items if isinstance(item, pytest.Function)}
    found = []
    for key in (*NEEDS, *NEEDS_NOTHING, *SLOW_TESTS, *OWN_JVM):
        module, _, test = key.partition("::")
        if test and module in modules and not hasattr(modules[module], test):
            found.append(key)
    return found


# --- under pytest-xdist (scripts/test.sh: -n 2 --dist loadgroup) ------------------------------
# Each worker is a process with its own session fixtures. What must not run at once on two
# workers, or would be made twice, is one xdist group, run by one worker in collection order:
#   "brokers": every test marked broker or live. Captures on lo (tcpdump `tcp port 5552`) see
#     every connection to the brokers, so no other test of this run may talk to them meanwhile.
#   "spark": the tests on the in-process Spark session (one JVM, one session, its cluster).
#   "reports": the tests of the corpus's reports, made once (corpus_report, slow_report).
#   otherwise the test's module, whose module-scoped fixtures are so made once.
# The tests that start a JVM of their own (a notebook's kernel, spark-submit) need no group.
OWN_JVM = {
    "test_notebooks.py::test_spark_archive_reads_an_archive_with_the_data_source",
    "test_spark_job.py::test_spark_submit_runs_the_job",
}
REPORT_FIXTURES = {"corpus_report", "slow_report"}


def xdist_group(item: pytest.Item) -> str:
    marks = {mark.name for mark in item.iter_markers()}
    if marks & {"broker", "live"}:
        return "brokers"
    if "spark" in marks and f"{item.path.name}::{item.originalname}" not in OWN_JVM:
        return "spark"
    if REPORT_FIXTURES & set(item.fixturenames):
        return "reports"
    return item.path.name


def distributed(config) -> bool:
    """Run by pytest-xdist: on its controller (--dist) or in one of its workers."""
    return hasattr(config, "workerinput") or config.getoption("dist", "no") != "no"


# Spark's JVMs here (the session's, the cluster's, a notebook kernel's, spark-submit's) run
# short jobs on 2 shared cores: the C2 compiler's and G1's threads cost them more than they
# give back (the results are the same; a JVM says "Picked up JAVA_TOOL_OPTIONS" on stderr)
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config):
    os.environ.setdefault("JAVA_TOOL_OPTIONS", JVM_OPTIONS)  # (what a user set, kept)
    if config.getoption("dist", "no") == "loadgroup":
        # (xdist hands out the groups in collection order, ours below, not by test count)
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)  # (before -m selects by them)
def pytest_collection_modifyitems(config, items):
    if stale := gone(items):
        raise pytest.UsageError(f"tests/conftest.py names tests that are gone: {stale}")
    for item in items:
        for name in sorted(needs(item)):
            item.add_marker(getattr(pytest.mark, name))
        if config.pluginmanager.hasplugin("xdist"):  # (its marker, registered by it)
            item.add_marker(pytest.mark.xdist_group(xdist_group(item)))
    if distributed(config):
        # the longest groups first, each to a worker, then the groups of the slow tests, so
        # that no long group starts last and leaves the other worker idle
        groups = {item.nodeid: xdist_group(item) for item in items}
        slow = {groups[item.nodeid] for item in items if item.get_closest_marker("slow")}
        rank = {"spark": 0, "brokers": 1}
        items.sort(key=lambda item: rank.get(groups[item.nodeid], 2 if groups[item.nodeid]
                                             in slow else 3))  # fmt: skip


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def _may_capture() -> bool:
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()
    except (OSError, AttributeError):
        return False
    return True


@functools.cache
def missing(resource: str) -> str | None:
    """Why `resource` is not there, or None."""
    if resource == "broker":
        down = ",".join(str(port) for port in BROKER_PORTS if not _answers(port))
        return f"nothing answers on 127.0.0.1:{down} (scripts/brokers.sh start)" if down else None
    if resource == "spark":
        found = os.environ.get("JAVA_HOME") or shutil.which("java")
        return None if found else "no Java for Spark (java on PATH or JAVA_HOME)"
    if resource == "browser":
        found = shutil.which("chromium") or shutil.which("chromium-browser")
        return None if found else "no chromium on PATH (scripts/test.sh installs it)"
    if resource == "live":
        if not shutil.which("tcpdump"):
            return "no tcpdump on PATH"
        return None if _may_capture() else "no right to capture packets (root or CAP_NET_RAW)"
    if resource == "tshark":
        lacking = " or ".join(tool for tool in ("tshark", "editcap") if not shutil.which(tool))
        return f"no {lacking} on PATH (scripts/brokers.sh installs them)" if lacking else None
    raise ValueError(resource)


def pytest_runtest_setup(item):
    for resource in RESOURCES:
        if item.get_closest_marker(resource) and (reason := missing(resource)):
            if item.config.getoption("require_resources"):
                pytest.fail(f"{resource}: {reason}", pytrace=False)
            pytest.skip(f"{resource}: {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that skips itself fails unless a marker says why it may: a resource marker,
    or skip/skipif (xfail is no skip)."""
    report = (yield).get_result()
    allowed = (*RESOURCES, "skip", "skipif")
    if (report.skipped and not hasattr(report, "wasxfail")
            and not any(item.get_closest_marker(name) for name in allowed)):
        said = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, but no marker says it may be ({said})"


# --- the real capture, made worse by the tests ------------------------------------------------


class RealCapture(NamedTuple):
    """The corpus's largest capture (worsen.real_capture): its file, link type and packets."""

    path: Path
    linktype: int
    packets: list[worsen.Packet]


@pytest.fixture(scope="session")
def real() -> RealCapture:
    path = worsen.real_capture()
    return RealCapture(path, *worsen.read_pcap(path))


@pytest.fixture(scope="session")
def real_frames(real) -> list[Row]:
    """The real capture's frames as the record path gives them; it has no anomaly."""
    frames, anomalies = frame_rows(Dissector().run(str(real.path)))
    assert frames and not anomalies
    return frames


# --- frames larger than a segment, recorded against the real broker ---------------------------

MESSAGES, MESSAGE_SIZE = 24, 100_000
CLIENT = textwrap.dedent(f"""
    import asyncio, uuid
    from rstream import Producer, Consumer, ConsumerOffsetSpecification, OffsetType

    async def main():
        stream = "sd-big-" + uuid.uuid4().hex[:8]
        async with Producer("127.0.0.1", 5552, username="guest", password="guest") as p:
            await p.create_stream(stream)
            for _ in range({MESSAGES} // 4):  # Publish frames of 400 kB: below frame_max
                await p.send_batch(stream, [b"m" * {MESSAGE_SIZE}] * 4)
        got = 0
        done = asyncio.Event()
        async def on_message(msg, ctx):
            nonlocal got
            got += 1
            if got == {MESSAGES}:
                done.set()
        async with Consumer("127.0.0.1", 5552, username="guest", password="guest") as c:
            await c.start()
            await c.subscribe(stream, on_message,
                              offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST))
            await asyncio.wait_for(done.wait(), 20)
            await c.delete_stream(stream)
    asyncio.run(main())
""")


def record_on_lo(path: Path, client: str, *args: str, port: int = 5552,
                 timeout: int = 60) -> str:  # fmt: skip
    """Run a client script (python -c) while tcpdump records lo (`tcp port PORT`) into
    `path`; the client's standard output. -B: a big kernel buffer, so tcpdump itself does
    not drop the bursts."""
    dump = subprocess.Popen(
        ["tcpdump", "-i", "lo", "-B", "65536", "-U", "-w", str(path), f"tcp port {port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        done = subprocess.run([sys.executable, "-c", client, *args], check=True,
                              timeout=timeout, capture_output=True, text=True)  # fmt: skip
        time.sleep(0.5)
    finally:
        dump.terminate()
        dump.wait(10)
    return done.stdout


@pytest.fixture(scope="session")
def big_capture(tmp_path_factory) -> Path:
    """Frames larger than a TCP segment, recorded here against the real 3.10 broker:
    Publish frames of 400 kB, Deliver chunks above 64 KiB."""
    path = tmp_path_factory.mktemp("big") / "big.pcap"
    record_on_lo(path, CLIENT)
    return path


# --- Spark, the report and Wireshark ----------------------------------------------------------


@pytest.fixture(scope="session")
def _cluster_booting(request, tmp_path_factory):
    """The standalone cluster (a master and two workers, pyspark's own) if this session is
    to run the test that uses it: started in a thread by the session's first test on the
    Spark session, so that its three JVMs boot while the Spark tests before it run; stopped
    at the end whatever happened. (cluster, the boot's future), or None."""
    if not any("standalone_cluster" in item.fixturenames for item in request.session.items):
        yield None
        return
    from concurrent.futures import ThreadPoolExecutor

    import pyspark.sql  # noqa: F401 (imported here first: pyspark imported by two threads at

    # once fails, "partially initialized module")
    from streamdissect.spark.cluster import LocalCluster

    cluster = LocalCluster(workers=2, cores=1, log_dir=str(tmp_path_factory.mktemp("cluster")))
    with ThreadPoolExecutor(max_workers=1) as pool:
        booting = pool.submit(cluster.start)
        try:
            yield cluster, booting
        finally:
            with contextlib.suppress(Exception):  # (its failure is the test's to say)
                booting.result()
            cluster.stop()


@pytest.fixture
def standalone_cluster(_cluster_booting):
    """The cluster above, up (its test stops it, and checks that everything it started is
    gone)."""
    cluster, booting = _cluster_booting
    booting.result()
    return cluster


@pytest.fixture(scope="session")
def _spark_stopped_at_the_end(_cluster_booting):
    yield
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


@pytest.fixture
def spark(_spark_stopped_at_the_end):
    """The local Spark session (local[2]) of this test session: one JVM, one session, made
    again only after a test stopped it."""
    from streamdissect.spark import session

    return session("local[2]")


@contextlib.contextmanager
def _session_kept():
    """What stops the Spark session within stops nothing: `streamdissect spark` run in this
    process (main()) stops the session its job ran on, the tests' shared one."""
    from pyspark.sql import SparkSession

    with mock.patch.object(SparkSession, "stop", lambda self: None):
        yield


@pytest.fixture
def spark_kept(spark):
    """The shared session, kept running through the test whatever stops it."""
    with _session_kept():
        yield spark


@pytest.fixture(scope="session")
def spark_command(_spark_stopped_at_the_end):
    """`streamdissect spark ARGS...` run in this process, as the command line runs it, on the
    shared local session: (exit code, standard output). A JVM and its Python workers start
    once, not once a job."""
    from streamdissect.cli import main

    def run(*args) -> tuple[int, str]:
        out = io.StringIO()
        with _session_kept(), contextlib.redirect_stdout(out):
            code = main(["spark", *map(str, args)])
        return code, out.getvalue()

    return run


@pytest.fixture(scope="session")
def slow_report(tmp_path_factory) -> Path:
    """`streamdissect report` of the slow consumer's capture, made once: its HTML file."""
    directory = tmp_path_factory.mktemp("slow-report")
    make_report(directory, str(SLOW))
    return directory / "report.html"


@pytest.fixture(scope="session")
def corpus_report(tmp_path_factory):
    """`streamdissect report CAPTURE --port 5552 --port 5553 -o FILE` run in this process
    (main()), once a capture, for the tests of its page and of its figures: (the page, what it
    wrote to stderr, {section anchor: the Figure drawn into the page})."""
    from streamdissect.cli import main

    directory = tmp_path_factory.mktemp("corpus-reports")

    @functools.cache
    def report_of(capture: Path) -> tuple[ReportPage, str, dict]:
        out, said = directory / f"{capture.stem}.html", io.StringIO()
        with (figures_kept() as figures, contextlib.redirect_stderr(said),
              contextlib.redirect_stdout(io.StringIO())):
            code = main(["report", str(capture), "--port", "5552", "--port", "5553",
                         "-o", str(out)])  # fmt: skip
        assert code == 0, said.getvalue()
        return ReportPage(out.read_text(encoding="utf-8")), said.getvalue(), figures

    return report_of


@pytest.fixture(scope="session")
def plugin(tmp_path_factory) -> Path:
    """The generated Wireshark dissector, written once."""
    from streamdissect.wireshark import generate

    path = tmp_path_factory.mktemp("wireshark") / "rabbitmq_stream.lua"
    path.write_text(generate())
    return path
