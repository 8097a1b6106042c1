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

import errno
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


def atomic_write_bytes(path, data: bytes, keep_unchanged: bool = True) -> bool:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename.
    Returns False (and touches nothing) when ``keep_unchanged`` and the file already holds ``data``."""
    path = Path(path)
    if keep_unchanged and _same_content(path, data):
        return False
    _make_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def write_tree(out_dir, files: dict[str, str | bytes]) -> list[Path]:
    """Write ``files`` (relative path -> text or bytes) under ``out_dir``, all or none.

    Files already holding the same bytes are not rewritten. Returns the paths actually written."""
    out_dir = Path(out_dir)
    blobs = {name: text.encode() if isinstance(text, str) else bytes(text) for name, text in files.items()}
    for name in blobs:
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts:
            raise CompileError(f"{name}: output names must stay inside {out_dir}")
    if out_dir.exists() and not out_dir.is_dir():
        raise CompileError(f"{out_dir}: exists and is not a directory")
    changed = [name for name, data in blobs.items() if not _same_content(out_dir / name, data)]
    if not changed:
        return []
    parent = out_dir.resolve().parent
    _make_dirs(parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=parent))
    try:
        for name in changed:
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blobs[name])
            os.chmod(target, _file_mode())
        if not out_dir.exists():
            for folder in [staging, *(p for p in staging.rglob("*") if p.is_dir())]:
                os.chmod(folder, _dir_mode())
            try:
                os.rename(staging, out_dir)
                return [out_dir / name for name in changed]
            except OSError as exc:  # another writer (make -j) made the folder first: move the files in
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not out_dir.is_dir():
                    raise
        for name in changed:
            _make_dirs((out_dir / name).parent)
            os.replace(staging / name, out_dir / name)
        return [out_dir / name for name in changed]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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
