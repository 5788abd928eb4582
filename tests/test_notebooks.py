"""Both notebooks run headless in a real Jupyter kernel (nbclient, python3 kernel), their
parameters injected after the cell tagged `parameters` as papermill injects them: no cell
fails, every cell tagged `figure` shows an image, and the stalls the notebook drew from are
where the slow consumer's client slept (the Spark notebook: from the Spark job's Parquet)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell
from reportlib import CAPTURES, sleeps, truth_of

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SLOW = CAPTURES / "rstream-slow-consumer-3.10.pcap"
# (printed by a cell the test adds at the end: the stalls of the data the figures drew)
STALLS_CELL = ("import json\n"
               "print('STALLS', json.dumps([[c, int(a), int(b)] for c, a, b in data.table(\n"
               "    'stalls')[['connection', 'start_ns', 'end_ns']].itertuples(index=False)]))")  # fmt: skip


@pytest.fixture(autouse=True)
def kernel_environment(monkeypatch):
    """The kernel imports this source tree, whatever is installed; Spark on loopback."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)


def execute(name: str, parameters: dict, timeout: int = 600,
            last_cell: str = STALLS_CELL) -> nbformat.NotebookNode:  # fmt: skip
    """The notebook run in a python3 kernel (working directory: notebooks/), its parameters
    in a cell after the `parameters` cell, `last_cell` after its own; nbclient raises on the
    first failing cell."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    at = next(i for i, cell in enumerate(notebook.cells)
              if "parameters" in cell.metadata.get("tags", []))  # fmt: skip
    injected = "\n".join(f"{key} = {value!r}" for key, value in parameters.items())
    notebook.cells.insert(at + 1, new_code_cell(injected,
                                                metadata={"tags": ["injected-parameters"]}))  # fmt: skip
    notebook.cells.append(new_code_cell(last_cell))
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})  # fmt: skip
    client.execute()
    return notebook


def assert_ran_with_figures(notebook: nbformat.NotebookNode) -> None:
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for cell in code:
        assert cell.execution_count is not None, cell.source
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
    figures = [cell for cell in code if "figure" in cell.metadata.get("tags", [])]
    assert len(figures) == 8
    for cell in figures:
        images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        assert len(images) == 1, cell.source


def assert_stalls_are_the_sleeps(notebook: nbformat.NotebookNode) -> None:
    (printed,) = [o.text for o in notebook.cells[-1].outputs if o.output_type == "stream"]
    port = next(c["client_port"] for c in truth_of(SLOW)["connections"] if "sleeps_ns" in c)
    stalls = sorted((start, end) for connection, start, end in
                    json.loads(printed.split("STALLS", 1)[1]) if f":{port}-" in connection)  # fmt: skip
    recorded = sleeps(SLOW)
    assert len(stalls) == len(recorded) + 1  # (the last, ended by the connection's end)
    for (start, end), (sleep_start, sleep_end) in zip(stalls, recorded):
        assert start <= sleep_start and sleep_end <= end


def test_traffic_report_on_a_capture():
    notebook = execute("traffic_report.ipynb", {"captures": [str(SLOW)], "parquet_dir": None})
    assert_ran_with_figures(notebook)
    assert_stalls_are_the_sleeps(notebook)


def test_traffic_report_on_a_parquet_directory(tmp_path):
    tables = tmp_path / "tables"
    subprocess.run([sys.executable, "-m", "streamdissect", "analyze", "--format", "parquet",
                    "-o", str(tables), str(SLOW)], cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    notebook = execute("traffic_report.ipynb", {"captures": [], "parquet_dir": str(tables)})
    assert_ran_with_figures(notebook)
    assert_stalls_are_the_sleeps(notebook)


def test_spark_archive_reads_an_archive_with_the_data_source(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    names = ("rstream-slow-consumer-3.10.pcap", "raw-errors-3.10.pcap",
             "rstream-publish-confirm-3.10.pcap")  # fmt: skip
    for name in names:
        shutil.copy(CAPTURES / name, archive / name)
    (archive / "notes.txt").write_text("not a capture")  # (the source's glob filter skips it)
    out = tmp_path / "out"
    notebook = execute("spark_archive.ipynb", {"archive": str(archive), "out": str(out),
                                               "master": "local[2]"})  # fmt: skip
    assert_ran_with_figures(notebook)
    assert_stalls_are_the_sleeps(notebook)
    # the job wrote its tables where the notebook said, and the figures came from them
    assert (out / "stalls").is_dir() and (out / "connections").is_dir()
    frames_by_command = next(cell for cell in notebook.cells if "groupBy" in cell.source)
    shown = frames_by_command.outputs[0]["data"]["text/plain"]
    assert "Deliver" in shown and "Publish" in shown
