"""notebooks/rocketmq_report.ipynb runs headless in a real Jupyter kernel (as
tests/test_notebooks.py runs the others): no cell fails, every cell tagged `figure` shows an
image, and the long poll it drew is the one the consumer's trace shows, from a capture and
from the tables `analyze --format parquet` wrote."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from rocketmq_support import CAPTURES, truth
from test_notebooks import ROOT, execute

LONG_POLL = CAPTURES / "rmq-long-poll.pcap"
PULLS_CELL = ("import json\n"
              "print('PULLS', json.dumps([[int(q), int(r)] for q, r in data.table(\n"
              "    'rocketmq_pulls')[['queue_offset', 'response_ts_ns']].dropna().itertuples(\n"
              "    index=False)]))")  # fmt: skip


@pytest.fixture(autouse=True)
def kernel_environment(monkeypatch):
    """The kernel imports this source tree, whatever is installed."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def run(parameters: dict) -> list:
    """The notebook run; the answered pulls its data held: [queue offset, response time]."""
    notebook = execute("rocketmq_report.ipynb", parameters, last_cell=PULLS_CELL)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(not [o for o in c.outputs if o.output_type == "error"] for c in code)
    figures = [cell for cell in code if "figure" in cell.metadata.get("tags", [])]
    assert len(figures) == 4
    for cell in figures:
        assert len([o for o in cell.outputs if "image/png" in o.get("data", {})]) == 1
    (printed,) = [o.text for o in code[-1].outputs if o.output_type == "stream"]
    return json.loads(printed.split("PULLS", 1)[1])


def _answered_pulls() -> list[list[int]]:
    """The consumer's pulls that got a response: [queue offset asked, response time (ms)]."""
    consumer = next(c["report"] for c in truth("rmq-long-poll")["clients"]
                    if c["report"]["role"] == "consumer")  # fmt: skip
    answered = {f["opaque"]: f["t"] for f in consumer["frames"] if f["dir"] == "s->c response"}
    return [[f["header"]["queueOffset"], answered[f["opaque"]]] for f in consumer["frames"]
            if f["dir"] == "c->s request" and f["code"] == 11 and f["opaque"] in answered]  # fmt: skip


def _same_pulls(drawn: list, traced: list) -> None:
    assert [offset for offset, _ in drawn] == [offset for offset, _ in traced]
    for (_, wire_ns), (_, client_ms) in zip(drawn, traced):
        # the wire sees the response a little before the client's clock (ms, one machine)
        # does
        assert client_ms - 5 <= wire_ns / 1e6 <= client_ms + 1


def test_rocketmq_report_on_a_capture():
    _same_pulls(run({"captures": [str(LONG_POLL)], "parquet_dir": None}), _answered_pulls())


def test_rocketmq_report_on_a_parquet_directory(tmp_path):
    tables = tmp_path / "tables"
    subprocess.run([sys.executable, "-m", "streamdissect", "analyze", "--format", "parquet",
                    "-o", str(tables), str(LONG_POLL)], cwd=ROOT, check=True,
                   capture_output=True)  # fmt: skip
    _same_pulls(run({"captures": [], "parquet_dir": str(tables)}), _answered_pulls())
