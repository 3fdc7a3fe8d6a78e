"""Files root unpacks under a strict umask are opened to the servers' own user."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fluxgate_stack import users


def test_a_tree_unpacked_under_umask_077_becomes_readable_and_runnable_by_all(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir(mode=0o700)
    launcher, library = tmp_path / "bin" / "elasticsearch", tmp_path / "lib.jar"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o700)
    library.write_text("jar")
    library.chmod(0o600)
    os.symlink(library, tmp_path / "link.jar")
    users.open_tree(tmp_path)
    mode = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "bin", launcher, library)}
    assert mode == {"bin": 0o755, "elasticsearch": 0o755, "lib.jar": 0o644}
