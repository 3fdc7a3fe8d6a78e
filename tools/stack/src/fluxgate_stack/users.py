"""Running a server as an unprivileged user when the stack itself runs as root.

Elasticsearch refuses to run as root; Cassandra runs, but as root it ``mlockall``s its whole
address space (over 1 GB resident from the first second). Both start through ``setpriv``,
which execs: the pid we record stays the server's (or its launcher's).
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from fluxgate_stack.errors import InstallError

# Executables the helpers below need when we are root, by Debian package.
ROOT_TOOLCHAIN = {"setpriv": "util-linux", "useradd": "passwd"}


def run_as(user: str) -> list[str]:
    """A prefix that execs the command as ``user`` (and its group): the pid stays the same."""
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]


def ensure_system_user(user: str) -> None:
    """Create ``user`` (no home, no login shell, a group of the same name) unless it exists."""
    try:
        pwd.getpwnam(user)
        return
    except KeyError:
        pass
    command = ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", user]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    # 9: created meanwhile by a parallel run
    if done.returncode not in (0, 9):
        raise InstallError(f"{' '.join(command)} failed: {done.stderr.strip()}")


def chown_tree(folder: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(folder):
        for name in [root, *(os.path.join(root, child) for child in (*dirs, *files))]:
            os.lchown(name, entry.pw_uid, entry.pw_gid)


def hand_over(folders: list[Path], user: str) -> None:
    """Create ``folders`` and, when we are root, give them (and ``user``) to the server."""
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        ensure_system_user(user)
        for folder in folders:
            chown_tree(folder, user)
