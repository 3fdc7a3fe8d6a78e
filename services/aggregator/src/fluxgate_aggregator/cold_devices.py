"""The device table's rows of the devices that went quiet, kept in the driver, out of Spark's
per-batch plans (:class:`~fluxgate_aggregator.ledger.Ledger`).

A fleet of a million thermostats reporting every half hour holds a million rows in the
device table, of which the devices with readings still in the ledger are a few percent. A
batch needs the others' rows only when one of them sends again, so they live here, looked
up by id for the few a batch meets, and Spark writes, caches and joins only the devices in
the ledger. SQLite in a file of the driver's temporary folder: bounded memory at any fleet
size. It holds nothing the checkpoint does not: a restart loads it back from the ledger's
``cold/`` files.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

Row = tuple[str, int | None, int | None, int | None]  # device_clocks.DEVICES_SCHEMA's columns
CHUNK = 500  # ids per lookup: under SQLite's limit on a statement's parameters


class ColdDevices:
    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="fluxgate-cold-devices-")
        self._db = sqlite3.connect(Path(self._folder.name) / "cold.sqlite", check_same_thread=False)
        # A copy of the checkpoint's files, rebuilt from them after a crash: no journal.
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._create()

    def _create(self) -> None:
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS devices (device_id TEXT PRIMARY KEY, newest_ms INTEGER,"
            " offset_ms INTEGER, floor_ms INTEGER) WITHOUT ROWID"
        )

    def clear(self) -> None:
        self._db.execute("DROP TABLE IF EXISTS devices")
        self._create()

    def put(self, rows: Iterable[Any]) -> int:
        """Store ``rows`` (device_id, newest_ms, offset_ms, floor_ms), replacing a device's
        former row; how many."""
        count = 0
        with self._db:
            for chunk in _chunks(rows, 10_000):
                self._db.executemany("INSERT OR REPLACE INTO devices VALUES (?, ?, ?, ?)", chunk)
                count += len(chunk)
        return count

    def get(self, ids: Iterable[str]) -> list[Row]:
        """The rows of those of ``ids`` it holds."""
        found: list[Row] = []
        for chunk in _chunks(ids, CHUNK):
            marks = ", ".join("?" * len(chunk))
            found += self._db.execute(f"SELECT * FROM devices WHERE device_id IN ({marks})", chunk).fetchall()  # noqa: S608
        return found

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM devices").fetchone()[0])

    def close(self) -> None:
        self._db.close()
        self._folder.cleanup()


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):  # a Spark Row is a tuple: SQLite takes it as it is
        yield chunk
