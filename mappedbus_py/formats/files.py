"""The files around a bus, opened without trusting the path: never through a symbolic
link, nothing but regular files (a FIFO or a device is refused without blocking on it),
owner and mode checked; small files (metadata) written atomically.

Shared by the single-file bus (``_mapping``), its metadata (``busmeta``) and the rolling
bus (``rolling``); ``interop/.../BusFiles.java`` does the same on the JVM side.
"""
import errno
import os
import secrets
import shutil
import stat

from ..errors import UnsafeBusFileError
from .layout import SIDE_FILES, SIDE_SUFFIXES, TMP_PREFIX

__all__ = ("file_kind", "check_trusted", "open_file", "read_to_end", "write_atomic", "side_files",
           "remove_bus")

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def file_kind(mode):
    """'a regular file', 'a FIFO', ... for an ``st_mode``."""
    if stat.S_ISREG(mode):
        return "a regular file"
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_trusted(st, path, allow_foreign=False, *, directory=False):
    """Refuse (UnsafeBusFileError) anything but a regular file (with ``directory``: a
    directory, a rolling bus's) owned by this process's user and not writable by group or
    others; ``allow_foreign`` accepts the last two."""
    want, what, harm = ((stat.S_ISDIR, "a directory: not a rolling bus", "add or replace its segments")
                        if directory else
                        (stat.S_ISREG, "a regular file: not a bus", "read and forge its records"))
    if not want(st.st_mode):
        raise UnsafeBusFileError(f"{path!r} is {file_kind(st.st_mode)}, not {what}")
    if allow_foreign:
        return
    uid = os.geteuid()
    if st.st_uid != uid:
        raise UnsafeBusFileError(
            f"{path!r} is owned by uid {st.st_uid}, not by this process's user (uid {uid}): "
            f"another user could {harm} (allow_foreign=True accepts it)")
    if st.st_mode & 0o022:
        raise UnsafeBusFileError(
            f"{path!r} has mode {stat.S_IMODE(st.st_mode):04o}: writable by group or others, "
            f"who could {harm} (allow_foreign=True accepts it)")


def open_file(path, flags, mode=0o600, *, allow_foreign=False):
    """``os.open`` that never follows a symbolic link and never blocks on a FIFO, then the
    checks of ``check_trusted`` on what was opened. Returns ``(fd, stat_result)``. A file
    this call creates (``O_CREAT``) gets exactly ``mode``, whatever the umask. Errors name
    the path."""
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        # Refused before opening: opening a FIFO or a device can block or have effects.
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeBusFileError(f"{path!r} is a symbolic link: bus files are never "
                                     f"opened through links")
        check_trusted(st, path, allow_foreign)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeBusFileError(f"{path!r} is a symbolic link: bus files are never "
                                     f"opened through links") from None
        raise OSError(e.errno, e.strerror, path) from None
    try:
        fst = os.fstat(fd)
        check_trusted(fst, path, allow_foreign)
        if st is None and flags & os.O_CREAT and fst.st_size == 0 and fst.st_uid == os.geteuid():
            os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd, fst


def read_to_end(fd):
    """The bytes from ``fd``'s offset to its end (reads of up to 4 MiB)."""
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 22)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def write_atomic(path, data, mode=0o600, *, exclusive):
    """Write ``data`` to ``path`` so that nobody ever sees part of it: into a temporary file
    beside it, then linked into place (``exclusive``: False if ``path`` exists already, and
    nothing is changed) or renamed over whatever is there. Returns True if written."""
    path = os.fspath(path)
    head, tail = os.path.split(path)
    tmp = os.path.join(head, f"{TMP_PREFIX}{tail}-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        else:
            os.rename(tmp, path)
            tmp = None
        return True
    except OSError as e:
        if e.filename is None:
            raise OSError(e.errno, e.strerror, path) from None
        raise
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass


def side_files(path: "str | os.PathLike[str]") -> "list[str]":
    """Every side file a bus at ``path`` may have (layout.SIDE_SUFFIXES: its metadata, wake
    file, consumer registry, writers file, commit log, work groups' directory), whether it
    exists or not: ``PATH + suffix`` for a single-file bus, ``DIR/name`` for a rolling bus (a
    directory)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return [os.path.join(path, name) for name in SIDE_FILES]
    return [path + suffix for suffix in SIDE_SUFFIXES]


def remove_bus(path: "str | os.PathLike[str]") -> None:
    """Remove a bus and every side file it has (tests, benchmarks, samples): a single-file
    bus's file and ``side_files``, or a rolling bus's directory. Missing ones are fine."""
    path = os.fspath(path)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    for f in (path, *side_files(path)):
        if os.path.isdir(f) and not os.path.islink(f):
            shutil.rmtree(f, ignore_errors=True)
        else:
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass
