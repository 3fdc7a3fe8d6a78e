"""Pidfile bookkeeping against a real `sleep` process (local, well under a second)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fluxgate_stack import process


def test_spawn_record_and_terminate(tmp_path: Path) -> None:
    record = process.spawn(["sleep", "30"], cwd=tmp_path, log_file=tmp_path / "run" / "x.log")
    pidfile = tmp_path / "run" / "x.pid"
    process.write_pidfile(pidfile, record)
    assert process.read_pidfile(pidfile) == record
    assert process.is_alive(record)
    process.terminate(record, grace=5)
    assert not process.is_alive(record)
    assert ": sleep 30" in process.tail(tmp_path / "run" / "x.log")


def test_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    record = process.spawn(["sleep", "30"], cwd=tmp_path, log_file=tmp_path / "x.log")
    try:
        impostor = dataclasses.replace(record, start_ticks=record.start_ticks + 1)
        assert not process.is_alive(impostor)
        process.terminate(impostor, grace=1)  # must not touch the real process
        assert process.is_alive(record)
    finally:
        process.kill(record)
    assert not process.is_alive(record)


def test_garbage_pidfile_reads_as_none(tmp_path: Path) -> None:
    (tmp_path / "bad.pid").write_text("12")
    assert process.read_pidfile(tmp_path / "bad.pid") is None
    assert process.read_pidfile(tmp_path / "missing.pid") is None


def test_port_free(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert not process.port_free("127.0.0.1", port)
    assert process.port_free("127.0.0.1", port)
