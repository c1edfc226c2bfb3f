"""Files that hold prompts and answers are their owner's alone: 0600, in directories 0700.

Modes are set explicitly when route creates a file or a directory, so the umask (022 makes
everything world-readable) does not decide them. SQLite gives its -wal and -shm files the mode
of the database file. A file an older version left group- or world-readable is tightened when
it is next opened; a directory route did not create keeps its mode (it may be shared on purpose).
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

__all__ = ["private_dirs", "private_file"]

_FILE_MODE, _DIR_MODE = 0o600, 0o700


def private_dirs(directory: Path) -> None:
    """Make `directory` and any missing parents, each 0700. An existing path that is not a
    directory raises NotADirectoryError, as `mkdir -p` would fail."""
    missing = []
    at = directory
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            os.mkdir(path, _DIR_MODE)
    if not directory.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(directory))


def private_file(path: Path, *, siblings: tuple[str, ...] = ("-wal", "-shm")) -> None:
    """Create `path` empty with mode 0600 unless it exists; tighten it (and its SQLite
    `siblings`) if an older version left them readable by others."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, _FILE_MODE))
        return
    except FileExistsError:
        pass
    for each in (path, *(path.with_name(path.name + s) for s in siblings)):
        _tighten(each)


def _tighten(path: Path) -> None:
    try:
        st = os.stat(path)
        if st.st_mode & 0o077 and st.st_uid == os.geteuid():
            os.chmod(path, st.st_mode & 0o700)
    except OSError:  # gone, or not ours to change: SQLite will say what it can do with it
        pass
