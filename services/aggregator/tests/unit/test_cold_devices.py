"""The driver's store of the device rows that went cold (no Spark: a SQLite file)."""

from __future__ import annotations

from pathlib import Path

from fluxgate_aggregator.cold_devices import CHUNK, ColdDevices


def test_a_later_row_of_a_device_replaces_its_earlier_one() -> None:
    store = ColdDevices()
    assert store.put([("d1", 1, 2, 3), ("d2", 4, 5, 6)]) == 2
    store.put([("d1", 7, None, 9)])
    assert sorted(store.get(["d1", "d2", "d3"])) == [("d1", 7, None, 9), ("d2", 4, 5, 6)]
    assert len(store) == 2
    store.close()


def test_more_ids_than_a_statement_takes_are_looked_up_in_chunks() -> None:
    store = ColdDevices()
    ids = [f"d{n}" for n in range(3 * CHUNK + 7)]
    store.put((device, n, n, n) for n, device in enumerate(ids))
    assert len(store.get([*ids, "never-seen"])) == len(ids)
    store.close()


def test_cleared_it_holds_nothing_and_closed_its_file_is_gone() -> None:
    store = ColdDevices()
    store.put([("d1", 1, 2, 3)])
    store.clear()
    assert store.get(["d1"]) == [] and len(store) == 0
    folder = Path(store._folder.name)
    assert (folder / "cold.sqlite").exists()
    store.close()
    assert not folder.exists()
