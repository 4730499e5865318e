"""Errors a user can fix. Their ``str()`` is one line naming the field and what was expected;
the CLI prints it and exits with code 2."""

from __future__ import annotations

__all__ = ["ContractError", "UserError", "check_user_path", "read_text_file", "write_text_atomically",
           "write_texts_atomically"]


class UserError(Exception):
    """A problem the user can fix (a file that exists, an unknown quantity name); one line."""


class ContractError(UserError, ValueError):
    """A contract that cannot be used; ``str()`` is one line naming the field and the expectation."""

    def __init__(self, message: str, field: str | None = None, origin: str | None = None):
        self.field = field
        self.origin = origin
        self.detail = message
        parts = [p for p in (origin, field) if p]
        super().__init__(": ".join(parts + [message]))


def check_user_path(path, field: str | None = None, origin: str | None = None) -> None:
    """Refuse a path no file can have, before anything looks it up: one holding a NUL byte (the system ends a path
    at its first NUL, so Python refuses it with ``ValueError: embedded null byte``). A path a user wrote in a file
    (a study's ``contracts``, ``workload.model.config``, a draft model's config) is checked here, by whoever
    resolves it, and by :func:`read_text_file` for every file botec reads; the path is shown escaped, never raw."""
    import os

    text = os.fsdecode(path) if isinstance(path, bytes) else str(path)
    if "\x00" in text:
        from botec.units import excerpt

        raise ContractError(f"expected a file path without a NUL byte (\\x00), got {excerpt(text)}", field=field,
                            origin=origin)


def read_text_file(path, what: str = "file", max_bytes: int | None = None) -> str:
    """The UTF-8 text of ``path``, or a one-line :class:`ContractError` (missing, unreadable, not text, too large,
    a path holding a NUL byte: :func:`check_user_path`).

    ``max_bytes``: refuse a file larger than this before reading it whole: its size is checked first, and at
    most ``max_bytes + 1`` characters are read (a device such as ``/dev/zero`` or a FIFO has no size to check).
    """
    import os
    from pathlib import Path

    check_user_path(path)
    origin = str(path)
    too_large = f"the {what} is larger than {max_bytes:,} bytes; is it the right file?" if max_bytes else ""
    try:
        if max_bytes is None:
            return Path(path).read_text(encoding="utf-8")
        if os.stat(path).st_size > max_bytes:
            raise ContractError(too_large, origin=origin)
        with open(path, encoding="utf-8") as file:
            text = file.read(max_bytes + 1)
        if len(text) > max_bytes:
            raise ContractError(too_large, origin=origin)
        return text
    except FileNotFoundError:
        raise ContractError(f"no such {what}", origin=origin) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ContractError(f"cannot read the {what} ({error.__class__.__name__}: {error})", origin=origin) from None


def write_text_atomically(path, text: str | bytes, option: str = "-o/--output", force: bool = False) -> None:
    """Write ``text`` (UTF-8; or ``bytes``, a binary file such as Parquet) to ``path`` (what ``-o/--output``
    names), whole or not at all, respecting what is there.

    - a regular file, or a new path: written to a uniquely named temporary file in the same folder,
      flushed to disk, then renamed over the path (and the folder flushed, so that the rename is durable too),
      so a reader sees the old or the new text and
      writers running at once never trip over each other; an existing file keeps its permission bits and its
      owner and group (root writing a user's file leaves it the user's);
    - a read-only file (no write permission for this user, or none for anyone: root ignores the bits): refused,
      unless ``force`` (``--force``); the rename would otherwise replace it silently;
    - SIGTERM or SIGINT while the temporary file exists: it is removed, then the signal goes on to do what it
      would have done (end the process, or raise KeyboardInterrupt); no hidden ``.NAME.*.tmp`` is left behind;
    - a symlink: written through to its target (the link stays a link);
    - a device, a FIFO, a socket, ``/dev/stdout`` and the like: written directly, never replaced
      (``/dev/null`` stays a device); ``-``: stdout;
    - a directory, or any failure (permission, missing folder, full disk): one line naming
      ``option`` and the path, a :class:`UserError`.
    """
    import os
    import sys

    binary = isinstance(text, bytes)
    if str(path) == "-":
        (sys.stdout.buffer if binary else sys.stdout).write(text)
        sys.stdout.flush()
        return
    descriptor = _descriptor_alias(str(path))
    if descriptor is not None:  # /dev/stdout, /dev/fd/3: the process's own stream, not a file to replace
        stream = {1: sys.stdout, 2: sys.stderr}.get(descriptor)
        try:
            if stream is not None:
                stream.flush()
                (stream.buffer if binary else stream).write(text)
                stream.flush()
            else:
                view = memoryview(text if binary else text.encode("utf-8"))
                while view:
                    view = view[os.write(descriptor, view):]
        except OSError as error:
            raise UserError(f"{option}: {path}: cannot write ({error.strerror or error})") from None
        return
    write_texts_atomically({path: text}, option, force)


def write_texts_atomically(texts: dict, option: str = "-o/--output", force: bool = False) -> None:
    """Write several files (``{path: text or bytes}``) as :func:`write_text_atomically` writes one, all or none:
    every target is checked first (a directory, a read-only file without ``force``: refused before anything is
    written), each regular file is written to its temporary beside it, and only when every temporary is written
    and flushed are they renamed over their paths, one after the other; any failure before that removes every
    temporary and leaves every path as it was. A device or FIFO among the paths is written into at the end."""
    import contextlib
    import os
    import stat
    from pathlib import Path

    def failure_of(path):
        return lambda reason: UserError(f"{option}: {path}: cannot write ({reason})")

    staged, streams = [], []
    for path, text in texts.items():
        failure = failure_of(path)
        try:
            existing = os.stat(path)  # follows a symlink
        except FileNotFoundError:
            existing = None
        except OSError as error:
            raise failure(error.strerror or error) from None
        mode = existing.st_mode if existing is not None else None
        if mode is not None and stat.S_ISDIR(mode):
            raise failure("it is a directory")
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        if mode is not None and not stat.S_ISREG(mode):  # a device, a FIFO, a socket: write into it
            streams.append((path, data, failure))
            continue
        if existing is not None and not force and (not os.access(path, os.W_OK) or not mode & 0o222):
            raise UserError(f"{option}: {path}: the file is read-only; pass --force to replace it")
        target = Path(os.path.realpath(path))  # a symlink (even a dangling one): the file it points to
        staged.append((target, data, existing, failure))
    with contextlib.ExitStack() as cleanup:
        renames = []
        for target, data, existing, failure in staged:
            temporary = cleanup.enter_context(_RemovedOnSignal(failure))
            try:
                temporary.create(target)
                with os.fdopen(temporary.handle, "wb") as stream:
                    stream.write(data)
                    stream.flush()
                    os.fsync(stream.fileno())
                if existing is not None:   # (the owner first: a change of owner clears set-user-ID bits)
                    _keep_owner(temporary.path, existing, failure, force)
                mode = existing.st_mode if existing is not None else None
                os.chmod(temporary.path, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
            except OSError as error:
                raise failure(error.strerror or error) from None
            renames.append((temporary, target, failure))
        for temporary, target, failure in renames:
            try:
                os.replace(temporary.path, target)
            except OSError as error:
                raise failure(error.strerror or error) from None
            temporary.path = None
    for folder in {target.parent for target, *_ in staged}:
        _sync_folder(folder)
    for path, data, failure in streams:
        try:
            with open(path, "wb") as stream:
                stream.write(data)
        except OSError as error:
            raise failure(error.strerror or error) from None


def _keep_owner(temporary: str, existing, failure, force: bool) -> None:
    """Give the temporary file the owner and group of the file it replaces (a rename would otherwise hand the
    file to whoever ran botec, root included). One who may not (another user's file, writable through its group)
    gets the one-line failure and the file is left as it was, unless ``force``: then the file becomes theirs."""
    import os

    made = os.stat(temporary)
    if not hasattr(os, "chown") or (made.st_uid, made.st_gid) == (existing.st_uid, existing.st_gid):
        return
    try:
        os.chown(temporary, existing.st_uid, existing.st_gid)
    except PermissionError:
        if not force:
            raise failure(f"it belongs to user {existing.st_uid} and group {existing.st_gid}, which a new file "
                          "cannot keep; pass --force to replace it") from None


class _RemovedOnSignal:
    """A temporary file beside the target, removed if the block ends without renaming it (an error, or SIGTERM or
    SIGINT: for the block's duration those signals raise :class:`_Signalled`; on leaving, the previous handlers
    come back and the signal is raised again, so the process ends, or sees KeyboardInterrupt, as it would have).
    Handlers can be set only in the main thread; elsewhere the signals are left alone (the file is still removed
    on an error)."""

    SIGNALS = ("SIGTERM", "SIGINT")

    def __init__(self, failure):
        self.failure = failure   # the one-line error, should a handler of the signal let the process go on
        self.path: str | None = None
        self.handle: int | None = None
        self._previous: dict = {}

    def create(self, target) -> None:
        """Make the temporary file with the signals held back until its name is kept: one arriving between the
        file's creation and the assignment would otherwise find no name to remove (it is delivered, and
        handled as above, as soon as they are let through)."""
        import signal
        import tempfile

        held = [number for number in self._previous]   # the signals this block handles (none off the main thread)
        if held:
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            self.handle, self.path = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        finally:
            if held:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, held)

    def __enter__(self) -> "_RemovedOnSignal":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                number = getattr(signal, name, None)
                if number is not None and signal.getsignal(number) is not signal.SIG_IGN:
                    self._previous[number] = signal.signal(number, self._raise)
        return self

    @staticmethod
    def _raise(number, frame):
        raise _Signalled(number)

    def __exit__(self, kind, error, traceback) -> bool:
        import os
        import signal

        try:
            if self.path is not None:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
        finally:
            for number, handler in self._previous.items():
                signal.signal(number, handler)
        if isinstance(error, _Signalled):
            signal.raise_signal(error.number)   # the previous handler's turn: the default ends the process
            raise self.failure(f"interrupted by {signal.Signals(error.number).name}") from None
        return False


class _Signalled(BaseException):
    """SIGTERM or SIGINT arrived while a temporary file existed (BaseException: no ``except Exception`` keeps it)."""

    def __init__(self, number: int):
        super().__init__(number)
        self.number = number


def _sync_folder(folder) -> None:
    """Flush a folder's entries to disk, so that a rename into it survives a power loss (POSIX makes the rename
    durable only once its directory is synced; the file's own fsync does not cover it). Best effort: a file
    system or platform that cannot open or sync a directory (Windows, some network mounts) is left as it is."""
    import os

    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _descriptor_alias(path: str) -> int | None:
    """The file descriptor that ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names."""
    import re

    named = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
    if path in named:
        return named[path]
    match = re.fullmatch(r"/(?:dev|proc/self)/fd/(\d+)", path)
    return int(match.group(1)) if match else None


def _umask() -> int:
    """The process's umask (the permission bits a new file does not get)."""
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask
