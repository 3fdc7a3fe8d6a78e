"""Files that hold secrets (keys, passwords, client secrets), written so that no one else can
read them, not even briefly, and never seen half-written; and the lock that makes "make it
once" safe when several processes (xdist workers, `up` and a test) ask at the same time."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


def write_private(path: Path, data: bytes | str, mode: int = 0o600) -> None:
    """Atomically (written aside, then renamed), created with ``mode``; a certificate may be
    0644, a secret stays 0600."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)
    os.chmod(temporary, mode)  # the umask may have taken bits away from a 0644
    os.replace(temporary, path)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (made if missing) for the block."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
