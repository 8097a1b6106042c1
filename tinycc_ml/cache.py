"""The per-user cache: built host libraries, the simavr runner, and the results of the fixed-point
scale search (so that an unchanged rebuild skips the search).

Where: $TINYCC_ML_CACHE, else $XDG_CACHE_HOME/tinycc-ml, else ~/.cache/tinycc-ml. Setting
TINYCC_ML_CACHE=off turns the result cache off (built helpers then stay in the default folder).
A cached result is used only from a folder that belongs to this user and that no one else can write
to, and its key covers the package's own source files, so an edited or upgraded compiler never
reads what an older one wrote.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import stat
import tempfile
from pathlib import Path

CACHE_ENV = "TINYCC_ML_CACHE"
DISABLED = ("off", "0", "none", "no")
log = logging.getLogger(__name__)


def cache_root() -> Path:
    base = os.environ.get(CACHE_ENV, "").strip()
    if not base or base.lower() in DISABLED:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "tinycc-ml")
    return Path(os.path.abspath(base))


def results_enabled() -> bool:
    return os.environ.get(CACHE_ENV, "").strip().lower() not in DISABLED


def private_dir(path: Path) -> bool:
    """The folder exists (it is created if missing), is ours and no one else can write to it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        info = path.stat()
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@functools.cache
@functools.cache
def source_fingerprint() -> str:
    """SHA-256 of every source file of the package: what decides a cached result besides its inputs (read once
    per process: the sources a process runs are the ones it imported)."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".lark", ".c", ".h", ".S")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _entry(kind: str, key: str) -> Path | None:
    folder = cache_root() / kind
    if not results_enabled() or not private_dir(cache_root()) or not private_dir(folder):
        return None
    return folder / f"{key}.json"


def load_result(kind: str, key: str) -> dict | None:
    """The JSON object stored under ``kind``/``key``, or None (absent, unreadable, cache off)."""
    path = _entry(kind, key)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def store_result(kind: str, key: str, value: dict) -> None:
    """Write atomically (a reader sees the whole entry or none); a failure only costs the next rebuild."""
    path = _entry(kind, key)
    if path is None:
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", dir=path.parent)
    except OSError as exc:
        log.debug("cache: cannot store %s/%s: %s", kind, key, exc)
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("cache: cannot store %s/%s: %s", kind, key, exc)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
