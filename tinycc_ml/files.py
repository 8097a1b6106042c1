"""Writing outputs the way build tools want them.

- All or nothing: every file is staged in a temporary folder beside its destination and moved in
  only when all of them are complete.
- Unchanged files are left alone (same bytes: no write, mtime kept), so Make and Ninja rebuild
  nothing downstream of a regeneration that changed nothing.
- Permissions follow the umask, like files made by ``open``: temporary files and folders are
  created private (0600/0700) and widened to 0666/0777 minus the umask before they are moved in.
- ``depfile_text`` writes Makefile-syntax dependency lines (the format gcc's -MD, Make and Ninja read).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from tinycc_ml.errors import CompileError


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (/proc), else set and restored."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _file_mode() -> int:
    return 0o666 & ~current_umask()


def _dir_mode() -> int:
    return 0o777 & ~current_umask()


def _same_content(path: Path, data: bytes) -> bool:
    try:
        return path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def _make_dirs(path: Path) -> None:
    """mkdir -p whose new folders get the umask's mode (mkdir does that itself; kept explicit)."""
    path.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def naming(path):
    """An OSError raised by a write without a file name (ENOSPC, EIO, EDQUOT come from write(), which
    knows no path) is raised again naming ``path``, the file the user asked for."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from None


def atomic_write_bytes(path, data: bytes, keep_unchanged: bool = True) -> bool:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename.
    Returns False (and touches nothing) when ``keep_unchanged`` and the file already holds ``data``."""
    path = Path(path)
    if keep_unchanged and _same_content(path, data):
        return False
    _make_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with naming(path), os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


@contextlib.contextmanager
def folder_lock(folder: Path):
    """An exclusive ``flock`` on ``folder`` itself (no lock file is left anywhere), held while a compile's
    outputs are compared and moved in: concurrent writers of one output folder then replace their sets of
    files one after the other, never interleaved (no ``m.h`` of one compile beside the ``m.c`` of another).
    Where flock is unavailable (Windows, some network file systems) the writers are not serialised."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # pragma: no cover - a file system without locks
            pass
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _stage_side_file(path: Path, data: bytes) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with naming(path), os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, _file_mode())
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(tmp)


def write_tree(out_dir, files: dict[str, str | bytes], side_files=None, check=None) -> list[Path]:
    """Write ``files`` (relative path -> text or bytes) under ``out_dir``, all or none.

    Files already holding the same bytes are not rewritten. Returns the paths actually written.

    ``side_files`` (path -> (bytes, keep_unchanged)): files outside the tree written with it (a depfile, a
    manifest): staged before any output is moved in, so one that cannot be written leaves the outputs
    untouched, and moved in right after them. ``check(out_dir)``, when given, runs under the folder's lock
    before anything is moved in (it may raise to refuse the write: a name clash with files already there).

    Concurrent writers of one folder: everything is staged first; comparing with what is there and moving
    in happens under an exclusive lock on the output folder's parent (see ``folder_lock``), so each
    compile's files land together and the last writer's set is complete."""
    out_dir = Path(out_dir)
    blobs = {name: text.encode() if isinstance(text, str) else bytes(text) for name, text in files.items()}
    for name in blobs:
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts:
            raise CompileError(f"{name}: output names must stay inside {out_dir}")
    if out_dir.exists() and not out_dir.is_dir():
        raise CompileError(f"{out_dir}: exists and is not a directory")
    side = {Path(p): v for p, v in (side_files or {}).items()}
    for path in side:
        if path.exists() and path.is_dir():
            raise CompileError(f"{path}: is a directory")
    if not side and check is None and not any(not _same_content(out_dir / n, d) for n, d in blobs.items()):
        return []
    parent = out_dir.resolve().parent
    _make_dirs(parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=parent))
    side_staged: dict[Path, Path] = {}
    try:
        for name, data in blobs.items():
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with naming(out_dir / name):
                target.write_bytes(data)
            os.chmod(target, _file_mode())
        for path, (data, keep) in side.items():  # staged beside their destinations: written before any output
            if keep and _same_content(path, data):
                continue
            if path.parent.resolve() != out_dir.resolve() or out_dir.is_dir():
                _make_dirs(path.parent)
                side_staged[path] = _stage_side_file(path, data)
        with folder_lock(parent):
            if check is not None:
                check(out_dir)
            if out_dir.exists() and not out_dir.is_dir():
                raise CompileError(f"{out_dir}: exists and is not a directory")
            changed = [name for name, data in blobs.items() if not _same_content(out_dir / name, data)]
            late = {}  # side files in a folder the rename below creates: moved with the tree
            for path, (data, keep) in side.items():
                if path not in side_staged and not (keep and _same_content(path, data)):
                    with naming(path):
                        (staging / path.name).write_bytes(data)
                    os.chmod(staging / path.name, _file_mode())
                    late[path.name] = path
            moved: list[Path] = []
            if (changed or late) and not out_dir.exists():
                for name in blobs:
                    if name not in changed:
                        (staging / name).unlink()
                for folder in [staging, *(p for p in staging.rglob("*") if p.is_dir())]:
                    os.chmod(folder, _dir_mode())
                os.rename(staging, out_dir)
                moved = [out_dir / name for name in changed] + list(late.values())
            else:
                for name in [*changed, *late]:
                    _make_dirs((out_dir / name).parent)
                    os.replace(staging / name, out_dir / name)
                moved = [out_dir / name for name in changed] + list(late.values())
            for path, tmp in side_staged.items():
                os.replace(tmp, path)
                moved.append(path)
            side_staged.clear()
        return moved
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        for tmp in side_staged.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def escape_make_path(path) -> str:
    """A path as Make and Ninja read it in a depfile: spaces and '#' escaped, '$' doubled."""
    text = os.fspath(path)
    out = []
    for i, ch in enumerate(text):
        if ch in " \t#":
            # backslashes right before an escaped space are doubled (the rule gcc -MD follows)
            j = i
            while j > 0 and text[j - 1] == "\\":
                out.append("\\")
                j -= 1
            out.append("\\" + ch)
        elif ch == "$":
            out.append("$$")
        elif ch == "\n":
            raise CompileError(f"{text!r}: a path with a newline cannot go in a depfile")
        else:
            out.append(ch)
    return "".join(out)


def depfile_text(targets, prerequisites) -> str:
    """``targets: prerequisites`` in Makefile syntax, one prerequisite per continued line, plus an
    empty rule per prerequisite so a deleted input does not break the next build (like gcc -MP)."""
    head = " ".join(escape_make_path(t) for t in targets)
    deps = [escape_make_path(p) for p in prerequisites]
    lines = [head + ":" + "".join(f" \\\n  {d}" for d in deps), ""]
    lines += [f"{d}:" for d in deps]
    return "\n".join(lines) + "\n"
