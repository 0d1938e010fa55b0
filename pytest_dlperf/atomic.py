"""Files the plugin writes: output paths checked before any work, and atomic replacement.

:func:`check_writable` is asked before a session's first case whether each output path can
be written (no folder, device or FIFO in its place, no file in its parent path, a folder that
takes a new file); :func:`write_atomic` replaces a file, or the file a symbolic link points
to, through a temporary file in the same folder, so that a reader never sees half a file
and a failed write leaves the old one as it was.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class OutputError(OSError):
    """A path that cannot be written: a folder, a device, a FIFO, a symbolic link that loops, or a
    write that failed.  The message names the path."""


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_output(path: str | os.PathLike) -> Path:
    """The file that writing ``path`` replaces: ``path``, or the file its symbolic link points to.

    Raises :class:`OutputError` naming ``path`` when that is a folder, a device, a FIFO or a
    socket, or when the link loops.  A path that does not exist yet is fine.
    """
    target = Path(path)
    real = Path(os.path.realpath(target))
    shown = f"{target} (-> {real})" if target.is_symlink() else str(target)
    if real.is_symlink():  # realpath gave up: the links loop
        raise OutputError(f"{target}: cannot write through this symbolic link: it loops")
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        return real
    except OSError as exc:
        raise OutputError(f"{shown}: cannot write: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise OutputError(f"{shown}: is {_kind_of(mode)}, not a file; give the path of a file to write")
    return real


def check_writable(path: str | os.PathLike, *, folder: bool = False) -> None:
    """Raise :class:`OutputError` unless ``path`` (a file, or with ``folder`` a folder) can be written.

    Made before any work whose result would go there: the target is no folder, device or FIFO
    (:func:`check_output`; with ``folder``, no file), no part of its parent path is a file, and
    a file can really be created in the nearest folder that exists (a read-only folder and
    ``/proc`` refuse it).  Nothing is left behind.
    """
    target = Path(path)
    if folder:
        if target.exists() and not target.is_dir():
            raise OutputError(f"{target}: is not a folder; give a folder to write into")
        probe_from = target
    else:
        probe_from = check_output(target).parent
    existing = probe_from
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise OutputError(f"{target}: cannot write: {existing} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".dlperf-probe.", dir=existing)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write in {existing}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)


def write_atomic(path: str | os.PathLike, text: str, *, durable: bool = True) -> None:
    """Replace the file ``path`` (or, through a symbolic link, the file it points to) with ``text``.

    The text goes to a temporary file in the same folder, is fsynced and renamed over the
    target; the folder is then fsynced.  On any failure the temporary file is removed and the
    old file stays as it was; the error (:class:`OutputError`) names ``path``.  ``durable=False``
    leaves out the two fsyncs, for a file that only needs a reader to see the old text or the new
    one, never half of it, and that nobody needs after a crash of the machine (a run's progress
    file, rewritten several times a run): each fsync is milliseconds on a local disk and can be
    far more on a network one.
    """
    real = check_output(path)
    tmp = None
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
        # backslashreplace: a lone surrogate (from a JSON "\\ud800" in a report's text) is written escaped.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        try:
            mode = real.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, real)
        tmp = None
        if durable:
            _fsync_folder(real.parent)
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        error = OutputError(f"{path}: cannot write: {exc.strerror or exc}")
        error.errno = exc.errno
        raise error from exc
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable; best effort (some filesystems cannot open or fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
