"""The session the job builds (``spark.build_session``), as the Spark lane's tests share it."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_its_python_workers_run_the_drivers_interpreter(spark: Any) -> None:
    # Before, they ran the PATH's python3: another interpreter, and possibly another version.
    ran = spark.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).collect()
    assert ran == [os.environ.get("PYSPARK_PYTHON") or sys.executable]
