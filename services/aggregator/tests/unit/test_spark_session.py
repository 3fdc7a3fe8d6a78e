"""Which interpreter the session's Python workers run (``spark.worker_python``)."""

from __future__ import annotations

import sys

from fluxgate_aggregator.spark import worker_python


def test_a_local_masters_workers_run_the_drivers_interpreter() -> None:
    assert worker_python("local[2]", {}) == sys.executable
    assert worker_python("local", {"PYSPARK_PYTHON": ""}) == sys.executable


def test_pyspark_python_or_a_cluster_keeps_its_own() -> None:
    assert worker_python("local[2]", {"PYSPARK_PYTHON": "/opt/python3.11"}) is None
    assert worker_python("spark://master:7077", {}) is None
    assert worker_python("k8s://https://kubernetes:443", {}) is None
