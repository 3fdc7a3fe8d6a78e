"""Checkpoint housekeeping that Spark leaves to its users."""

from __future__ import annotations

import structlog
from pyspark.sql import SparkSession

log = structlog.get_logger(__name__)

LOGS = ("offsets", "commits")


def location(checkpoint_dir: str, query: str) -> str:
    """``query``'s checkpoint under ``checkpoint_dir``, joined as a URI (``s3a://b/x`` must keep its ``//``)."""
    return f"{checkpoint_dir.rstrip('/')}/{query}"


def read_text(spark: SparkSession, path: str) -> str | None:
    """A checkpoint file's text through Hadoop's FileSystem (HDFS, object stores); None when there is none."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "a classic (non-Connect) SparkSession"
    source = jvm.org.apache.hadoop.fs.Path(path)
    fs = source.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[union-attr]
    if not fs.exists(source):
        return None
    stream = fs.open(source)
    try:
        data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream, fs.getFileStatus(source).getLen())
    finally:
        stream.close()
    return bytes(data).decode()


def is_abandoned_temp_file(name: str) -> bool:
    """A log entry Spark began to write but never renamed into place: ``.0.<uuid>.tmp`` and its ``.crc``."""
    return name.startswith(".") and (name.endswith(".tmp") or name.endswith(".tmp.crc"))


def remove_abandoned_temp_files(spark: SparkSession, checkpoint: str) -> list[str]:
    """Spark writes each offset and commit log entry to a temp file, then renames it. A job
    killed or stopped in between leaves the temp file behind, and if that happened during
    the first batch Spark 4.1 refuses the checkpoint on every later start
    (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY: "offsets should be empty on batch 0").
    Nothing writes a query's checkpoint while the query is stopped, so such a file is
    garbage. Goes through Hadoop's FileSystem so HDFS and object-store checkpoints work too."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "a classic (non-Connect) SparkSession"
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    removed = []
    for entry_log in LOGS:
        directory = jvm.org.apache.hadoop.fs.Path(f"{checkpoint}/{entry_log}")
        fs = directory.getFileSystem(conf)
        if not fs.exists(directory):
            continue
        for status in fs.listStatus(directory):
            path = status.getPath()
            if is_abandoned_temp_file(path.getName()) and fs.delete(path, False):
                removed.append(path.toString())
    if removed:
        log.warning("checkpoint.abandoned_temp_files_removed", checkpoint=checkpoint, files=removed)
    return removed
