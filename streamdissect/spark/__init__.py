"""The Spark face: capture archives as DataFrames.

    from streamdissect.spark import session
    spark = session()                                  # local[*], the source registered
    frames = spark.read.format("streamdissect").load("archive/")      # schema.FRAMES
    conns = (spark.read.format("streamdissect").option("table", "connections")
             .load("archive/*.pcap.gz"))

A Python Data Source (`source.py`): the driver lists the files and packs them into
partitions (`files.py`); each task dissects its files with the core (frame_batches, the
analysis) and yields Arrow record batches with the types of `streamdissect.tables.schema` as Spark
holds them (`types.py`: u64 as decimal(20,0)). This package imports the core and pyspark;
the core never imports it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

NAME = "streamdissect"


def spark_environment() -> None:
    """What Spark needs here, unless already set: the loopback address, and this very
    interpreter for the Python workers (the one that has streamdissect)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def register(spark: Any) -> None:
    """Make `spark.read.format("streamdissect")` known to a session."""
    from streamdissect.spark.source import StreamDissectSource

    spark.dataSource.register(StreamDissectSource)


def session(master: str | None = None, app: str = "streamdissect", **conf: str) -> Any:
    """A SparkSession (local[*] by default) with the source registered."""
    spark_environment()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app).master(master or "local[*]")
    builder = builder.config("spark.driver.host", "127.0.0.1")
    builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
    builder = builder.config("spark.ui.enabled", "false")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
