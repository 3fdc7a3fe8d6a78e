"""Running a server as an unprivileged user when the stack itself runs as root.

Elasticsearch refuses to run as root; Cassandra runs, but as root it ``mlockall``s its whole
address space (over 1 GB resident from the first second). Both start through ``setpriv``,
which execs: the pid we record stays the server's (or its launcher's).
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import stat
import subprocess
from pathlib import Path

from fluxgate_stack.errors import InstallError

# Executables the helpers below need when we are root, by Debian package.
ROOT_TOOLCHAIN = {"setpriv": "util-linux", "useradd": "passwd"}
# Where an unprivileged server lives when its user cannot reach the checkout.
UNPRIVILEGED_ROOT = Path("/var/lib/fluxgate-stack")


def can_traverse(folder: Path, user: str) -> bool:
    """Whether ``user`` may enter every existing folder on the way to ``folder`` (a folder not
    created yet counts as enterable: we create it, and ``hand_over`` gives the data to the user).
    A user that does not exist yet has no ownership or group: only the others' bits count."""
    try:
        entry: pwd.struct_passwd | None = pwd.getpwnam(user)
    except KeyError:
        entry = None
    groups = set() if entry is None else {entry.pw_gid, *(g.gr_gid for g in grp.getgrall() if user in g.gr_mem)}
    for step in [*reversed(folder.absolute().parents), folder.absolute()]:
        try:
            info = step.stat()
        except FileNotFoundError:
            return True
        if entry is not None and info.st_uid == entry.pw_uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid in groups:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return False
    return True


def unprivileged_local_dir(local_dir: Path, user: str, chosen: Path | None) -> Path:
    """The folder an unprivileged server keeps its files in (distribution, config, data, logs):
    the checkout's ``.local`` when ``user`` can reach it, else ``chosen``, else a folder of
    this checkout's own under /var/lib/fluxgate-stack (root's home, and any ``mktemp -d``, is
    mode 700: Elasticsearch run as ``user`` could not even read its own launcher there)."""
    if os.geteuid() != 0 or can_traverse(local_dir, user):
        return local_dir
    if chosen is not None:
        return chosen
    checkout = hashlib.sha256(str(local_dir.absolute()).encode()).hexdigest()[:12]
    return UNPRIVILEGED_ROOT / checkout


def open_to_all(folder: Path) -> None:
    """Create ``folder`` and its missing parents readable and enterable by everyone (whatever
    the umask), so an unprivileged server reaches the files root installs in it."""
    missing = [step for step in [*reversed(folder.parents), folder] if not step.exists()]
    for step in missing:
        step.mkdir(exist_ok=True)
        step.chmod(0o755)


def open_tree(folder: Path) -> None:
    """Make everything under ``folder`` readable by everyone, and its folders and executables
    runnable, whatever root's umask was when it was unpacked (077 would lock the user out)."""
    for root, _dirs, files in os.walk(folder):
        for path in [root, *(os.path.join(root, name) for name in files)]:
            mode = os.lstat(path).st_mode
            wanted = mode | 0o444 | (0o111 if stat.S_ISDIR(mode) or mode & stat.S_IXUSR else 0)
            if wanted != mode and not stat.S_ISLNK(mode):
                os.chmod(path, stat.S_IMODE(wanted))


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
