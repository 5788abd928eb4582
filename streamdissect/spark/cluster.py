"""A Spark standalone cluster on this machine, from the pyspark package itself: a master and
workers started with `spark-class` (bound to 127.0.0.1), stopped by pid.

    with LocalCluster(workers=2, cores=1) as cluster:
        spark = session(cluster.master_url)

What a user runs by hand to try a real cluster, and what the tests start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from streamdissect.spark import spark_environment


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """A standalone master and `workers` workers of `cores` cores each."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g",
                 log_dir: str | None = None) -> None:  # fmt: skip
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.log_dir = Path(log_dir or f"/tmp/streamdissect-spark-{self.port}")
        self.processes: list[subprocess.Popen] = []

    def _start(self, name: str, *args: str) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 (kept with the process)
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1"}
        self.processes.append(subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args], stdout=log,
            stderr=subprocess.STDOUT, env=env, start_new_session=True))  # fmt: skip

    def __enter__(self) -> LocalCluster:  # noqa: PYI034
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """The master, then the workers; back when every worker has registered. A cluster
        running already is left as it is (`with` on one started beforehand: stopped on
        leaving); a stopped one starts again."""
        if any(process.poll() is None for process in self.processes):
            return
        self.processes = []
        spark_environment()
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(free_port()))  # fmt: skip
        self._wait_for("master.log", "Starting Spark master", 60)
        for k in range(self.workers):
            self._start(f"worker{k}", "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1", "--cores", str(self.cores), "--memory",
                        self.memory, "--webui-port", str(free_port()),
                        self.master_url)  # fmt: skip
        for k in range(self.workers):
            self._wait_for(f"worker{k}.log", "Successfully registered with master", 60)

    def _wait_for(self, log: str, text: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        path = self.log_dir / log
        while time.monotonic() < deadline:
            if path.exists() and text in path.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self.processes):
                break
            time.sleep(0.2)
        raise RuntimeError(f"the Spark {log[:-4]} did not start: see {path}")

    def stop(self) -> None:
        """Every process started, stopped (again: nothing)."""
        for process in reversed(self.processes):  # (the JVM's process group, by pid)
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
