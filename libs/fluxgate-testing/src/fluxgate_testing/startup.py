"""A service started as it is deployed, to see whether it stops at start and what it says:
the end-to-end tests that give a service a wrong password, CA or user (``tests/e2e/test_wrong_*``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent  # the console scripts of the venv running the tests
START_TIMEOUT = 60.0
# Every store the console shows, off (the settings without the console's prefix).
_CONSOLE_STORES = {"ELASTICSEARCH__HOSTS": "[]", "SCYLLA__CONTACT_POINTS": "[]", "HAZELCAST__MEMBERS": "[]"}


def console_with_only(store: str) -> dict[str, str]:
    """The console's settings (without its prefix) to start it with one store alone (``store``:
    ``"ELASTICSEARCH"`` or ``"SCYLLA"``), no login on its page and any free web port."""
    others = {name: value for name, value in _CONSOLE_STORES.items() if not name.startswith(store + "__")}
    return {"PAGE_AUTH__MODE": "none", "REPLAY_AUTH__MODE": "none", "WEB__PORT": "0", **others}


def run_until_exit(
    script: str, prefix: str, stack: Any, env: Mapping[str, str], timeout: float = START_TIMEOUT
) -> tuple[int | None, str]:
    """Run the console script ``script`` (settings under ``prefix``) from the environment alone,
    none of this shell's ``FLUXGATE_*``: the stack's Kafka and registry, its HTTP port free,
    then ``env`` over them. Its exit code and output once it exits; ``None`` and what it said
    when it still runs at ``timeout`` (it is stopped then: it never said what was wrong)."""
    variables = {name: value for name, value in os.environ.items() if not name.startswith("FLUXGATE_")}
    variables |= {f"{prefix}KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap, f"{prefix}REGISTRY__URL": stack.registry_url}
    variables |= {f"{prefix}HTTP__PORT": "0", f"{prefix}HTTP__HOST": "127.0.0.1", **env}
    try:
        done = subprocess.run(
            [str(BIN / script)], env=variables, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        said = (exc.stdout or b"") + (exc.stderr or b"")
        return None, said.decode(errors="replace") if isinstance(said, bytes) else str(said)
    return done.returncode, done.stdout + done.stderr
