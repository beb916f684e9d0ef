"""The data node: a Spark Structured Streaming query from the channels to S3.

Each micro-batch is a offset range per channel (planned on the driver, see ``source.py``);
executor tasks, one per channel, write its binlogs, deltalogs and stats to S3 and return a
few rows describing them; ``BatchSink`` (on the driver) merges those rows and reports them to
datacoord, which records the files and the channel checkpoints and marks sealed segments
Flushed. Spark's checkpoint directory holds the offsets: a job killed at any point replays its
last batch with the same offsets, which overwrites the same objects and reports the same files.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vectide.services.common.config import Config
from vectide.services.common.metrics import DATANODE_SKIPPED
from vectide.services.common.msgstream.channels import pchannels
from vectide.services.common.msgstream.kafka import security_settings
from vectide.services.common.msgstream.tick_index import tick_index_topic
from vectide.services.common.objectstore import ObjectStore
from vectide.streaming.flush import merge_rows

log = logging.getLogger(__name__)


class BatchSink:
    """``foreachBatch`` target: runs on the driver, with the datacoord client. It only
    gathers the small rows the executor tasks returned; the data never reaches it."""

    def __init__(self, datacoord: Any) -> None:
        self._datacoord = datacoord

    def __call__(self, frame: Any, batch_id: int) -> None:
        started = time.monotonic()
        rows = [(row.kind, row.body) for row in frame.collect()]  # runs the tasks
        written = time.monotonic()
        report, stats, executors = merge_rows(rows)
        flushed = self._datacoord.save_batch(report)
        DATANODE_SKIPPED.inc(stats.poison)  # after the save: a failed batch is replayed
        if stats.rows or stats.deletes or flushed:
            log.info(
                "batch persisted",
                extra={
                    "batch": batch_id,
                    "records": stats.records,
                    "rows": stats.rows,
                    "deletes": stats.deletes,
                    "segments": len(stats.segments),
                    "flushed": len(flushed),
                    "poison": stats.poison,
                    "tasks": len(executors),
                    "executors": len(set(executors)),
                    "tasks_ms": int((written - started) * 1000),
                    "consume_ms": stats.consume_ms,
                    "write_ms": stats.write_ms,
                    "ms": int((time.monotonic() - started) * 1000),
                },
            )


#: JVM flags of the driver and executors (see ``spark_session``)
JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


@dataclass
class SparkSettings:
    """How the data node's Spark application runs (from ``data.*`` config)."""

    master: str = "local[2]"
    #: the driver's UI and monitoring REST API (``/api/v1``); 0 disables it
    ui_port: int = 0
    #: cores the application takes from a standalone/k8s cluster (0: all offered)
    max_cores: int = 0
    executor_memory_mb: int = 1024
    #: the address executors reach the driver at (cluster masters)
    driver_host: str = "127.0.0.1"


def spark_session(settings: SparkSettings, app: str = "vectide-datanode") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(settings.master)
        .appName(app)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.host", settings.driver_host)
        .config("spark.executor.memory", f"{settings.executor_memory_mb}m")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        .config("spark.ui.showConsoleProgress", "false")
        # executors keep their channel consumers and S3 clients between batches
        .config("spark.python.worker.reuse", "true")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        # one task per channel range: no waiting for a data-local slot
        .config("spark.locality.wait", "0s")
        # a small heap of short-lived objects: G1's concurrent marking threads cost an idle
        # driver more CPU than the pauses of a stop-the-world collector cost a busy one
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
        # without Hadoop's native library, the default (FileContext) manager forks `chmod` and
        # `readlink` from the JVM for every checkpoint file; this one forks one `chmod` per
        # batch. Renames stay atomic on a local or HDFS checkpoint directory.
        .config(
            "spark.sql.streaming.checkpointFileManagerClass",
            "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
        )
    )
    if settings.ui_port:
        builder = builder.config("spark.ui.enabled", "true").config(
            "spark.ui.port", str(settings.ui_port)
        )
    else:
        builder = builder.config("spark.ui.enabled", "false")
    if settings.max_cores:
        builder = builder.config("spark.cores.max", str(settings.max_cores))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start_query(
    spark: Any,
    config: Config,
    sink: BatchSink,
    checkpoint_dir: Path,
    trigger_s: float,
    source_options: dict[str, str] | None = None,
) -> Any:
    from vectide.streaming.source import ChannelSource, s3_options

    spark.dataSource.register(ChannelSource)
    channels = pchannels(config.cluster.name, config.cluster.dml_channels)
    reader = (
        spark.readStream.format("vectide_channels")
        .option("bootstrap", config.kafka.bootstrap_servers)
        .option("kafka_secret_conf", json.dumps(security_settings(config.kafka)))
        .option("channels", ",".join(channels))
        # the ticks' offsets, published by the rootcoord: the driver reads no payloads
        .option(
            "tick_index", tick_index_topic(config.cluster.name) if config.data.tick_index else ""
        )
        .option("max_records_per_channel", str(config.data.max_records_per_channel))
        .option("idle_advance_s", str(config.data.idle_checkpoint_s))
        .option("fetch_wait_ms", str(max(config.kafka.fetch_wait_max_ms, 10)))
        # the driver's scanner fetches all the time: a long wait while nothing arrives (a
        # fetch finding data returns at once, so a busy channel is read without waiting)
        .option("scan_fetch_wait_ms", str(config.kafka.fetch_wait_idle_ms))
    )
    for key, value in {**s3_options(config.s3), **(source_options or {})}.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(processingTime=f"{trigger_s} seconds")
        .start()
    )


def default_checkpoint_dir(config: Config) -> Path:
    return config.run_dir / "datanode" / config.cluster.name / "checkpoint"


def spark_settings(config: Config) -> SparkSettings:
    data = config.data
    return SparkSettings(
        master=data.spark_master,
        ui_port=data.spark_ui_port,
        max_cores=data.spark_max_cores,
        executor_memory_mb=data.spark_executor_memory_mb,
        driver_host=config.service.host,
    )


def run(
    config: Config,
    datacoord: Any,
    settings: SparkSettings | None = None,
    checkpoint_dir: Path | None = None,
    wake_file: Path | None = None,
) -> Any:
    """Start the data node's streaming query; returns it (``awaitTermination`` to block).

    ``wake_file`` holds the newest seal stamp a flush waits for (``FlushWake`` writes it):
    the source runs a batch for it at once instead of waiting for the idle period.
    """
    ObjectStore(config.s3).ensure_bucket()
    spark = spark_session(settings or spark_settings(config))
    checkpoint_dir = checkpoint_dir or default_checkpoint_dir(config)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    options = {"wake_file": str(wake_file)} if wake_file else {}
    trigger_s = config.data.trigger_s
    return start_query(spark, config, BatchSink(datacoord), checkpoint_dir, trigger_s, options)


def ui_url() -> str:
    """The driver's Spark UI (monitoring REST API under ``/api/v1``), or '' when disabled."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    return (context.uiWebUrl or "") if context is not None else ""


def stop(query: Any) -> None:
    """Stop the streaming query, then the Spark application (its executors go with it).
    A SIGTERM reaches the JVM too, whose own shutdown hook may be stopping both already."""
    from py4j.protocol import Py4JError
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
        return
    try:
        query.stop()
        context.stop()
    except Py4JError:
        log.info("Spark was stopped by its own shutdown hook")
