"""The data node: a Spark Structured Streaming query from the channels to S3.

Each micro-batch (a tick-bounded offset range per channel, see ``source.py``) is written by
``flush.process_batch`` to binlogs, deltalogs and stats on S3, then reported to datacoord,
which records the files and the channel checkpoints and marks sealed segments Flushed.
Spark's checkpoint directory holds the offsets: a job killed at any point replays its last
batch with the same offsets, which overwrites the same objects and reports the same files.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from services.common.config import Config
from services.common.msgstream.channels import pchannels
from services.common.msgstream.kafka import security_settings
from services.common.objectstore import ObjectStore
from streaming.flush import Record, process_batch

log = logging.getLogger(__name__)


class BatchSink:
    """``foreachBatch`` target: runs on the driver, with the datacoord client."""

    def __init__(self, store: Any, datacoord: Any) -> None:
        self._store = store
        self._datacoord = datacoord

    def __call__(self, frame: Any, batch_id: int) -> None:
        started = time.monotonic()
        # Arrow to the driver: Row objects (collect) cost ~10x more for large payloads
        table = frame.toArrow()
        records = [
            Record(channel, offset, value)
            for channel, offset, value in zip(
                table.column("channel").to_pylist(),
                table.column("offset").to_pylist(),
                table.column("value").to_pylist(),
                strict=True,
            )
        ]
        report, stats = process_batch(records, self._store)
        flushed = self._datacoord.save_batch(report)
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
                    "ms": int((time.monotonic() - started) * 1000),
                },
            )


def spark_session(master: str, app: str = "vectide-datanode") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start_query(
    spark: Any, config: Config, sink: BatchSink, checkpoint_dir: Path, trigger_s: float
) -> Any:
    from streaming.source import ChannelSource

    spark.dataSource.register(ChannelSource)
    channels = pchannels(config.cluster.name, config.cluster.dml_channels)
    frame = (
        spark.readStream.format("vectide_channels")
        .option("bootstrap", config.kafka.bootstrap_servers)
        .option("kafka_secret_conf", json.dumps(security_settings(config.kafka)))
        .option("channels", ",".join(channels))
        .load()
    )
    return (
        frame.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(processingTime=f"{trigger_s} seconds")
        .start()
    )


def default_checkpoint_dir(config: Config) -> Path:
    return config.run_dir / "datanode" / config.cluster.name / "checkpoint"


def run(
    config: Config,
    datacoord: Any,
    master: str = "local[2]",
    trigger_s: float = 1.0,
    checkpoint_dir: Path | None = None,
) -> Any:
    """Start the data node's streaming query; returns it (``awaitTermination`` to block)."""
    store = ObjectStore(config.s3)
    store.ensure_bucket()
    spark = spark_session(master)
    checkpoint_dir = checkpoint_dir or default_checkpoint_dir(config)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    return start_query(spark, config, BatchSink(store, datacoord), checkpoint_dir, trigger_s)
