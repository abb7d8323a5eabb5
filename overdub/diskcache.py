"""The on-disk kernel cache: a new process launches what earlier ones compiled, and never stale code.

numba's own ``cache=True`` keys an entry by the kernel's file and trusts it while that file is unchanged, so
an edited callee in another module leaves it stale (numba issues #1833, #9483). Here an entry is *found* by
what is known before compiling -- the kernel's own code, its argument types, its context chain, the target
(and its compute capability or CPU), every field of the compile job, and the versions of overdub (a digest of
its source), numba, numba-cuda, llvmlite, numpy and Python -- and *accepted* only after every other thing
the compile consulted is re-checked in this process (:mod:`overdub.fingerprint`): each dispatch is resolved
again here and must reach a method with the same code, each global must hold the same value, each function
compiled must have the same code. The re-check goes through the calls a compile makes, so the loaded kernel
holds the same edges as a freshly compiled one and is invalidated in this process in the same way. A kernel
whose compile consulted something without a content digest is compiled and not stored.

Files: ``$OVERDUB_CACHE_DIR`` (default: the per-user cache directory, ``~/.cache/overdub``), one file per
entry, written to a temporary file and renamed into place (concurrent writers never expose half a file; the
last one wins). A file that is truncated or corrupt is a miss with a warning, and is replaced. The directory
is kept under ``$OVERDUB_CACHE_SIZE`` megabytes (default 1024) by removing the least recently used entries
(a hit touches its file); a process measures the directory on its first store, when what it wrote since
would pass the bound, and at least every ten seconds while it stores. ``OVERDUB_CACHE=0`` turns the cache
off. Entries are pickles: the cache directory must be as trusted as the code (as numba's cache directory
is).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import logging
import os
import pathlib
import pickle
import platform
import sys
import tempfile
import threading
import time
import warnings

from . import settings
from .fingerprint import Uncacheable, context_digest, function_digest, record, replay, type_digest
from .runtime import runtime

log = logging.getLogger("overdub")

__all__ = ["directory", "load", "store"]

FORMAT = 2  # 2: facts and needs are records (fingerprint.Fact, enum members), not tuples and strings
_MAGIC = b"ODKC"
_SUFFIX = ".odk"
_TRIMMED_TO = 0.8  # after trimming, the directory holds at most this fraction of the limit
_RESCAN_SECONDS = 10.0  # a process scans the directory's size again at least this often while it stores
_usage: dict = {}  # directory -> (bytes it holds by this process's last scan and writes, scan time)
runtime.register_cache(f"{__name__}._usage", _usage)  # cleared: the next store measures the directory again
_usage_lock = threading.Lock()
_versions: str | None = None
runtime.register_cache(f"{__name__}._versions", kept="the versions installed: facts of the process")


def directory() -> pathlib.Path | None:
    """The cache directory, or None when ``OVERDUB_CACHE`` turns the cache off."""
    if not settings.CACHE.value():
        return None
    return pathlib.Path(settings.CACHE_DIR.value()) / f"v{FORMAT}"


def _limit() -> int:
    return settings.CACHE_SIZE.value()


# --- the key --------------------------------------------------------------------------------------------


def _package_versions() -> str:
    """The versions of what turns a kernel into code: overdub's own source (by content), numba, numba-cuda,
    llvmlite, numpy, Python."""
    global _versions
    if _versions is None:
        package = pathlib.Path(__file__).parent
        source = hashlib.sha256()
        for path in sorted(package.rglob("*.py")):
            source.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
        versions = []
        for name in ("numba", "numba-cuda", "llvmlite", "numpy"):
            try:
                versions.append(f"{name}={importlib.metadata.version(name)}")
            except importlib.metadata.PackageNotFoundError:
                versions.append(f"{name}=none")
        _versions = "|".join([source.hexdigest(), *versions, sys.version, platform.machine()])
    return _versions


_KEYED_FIELDS = ("func_ref", "name")  # the function is keyed by its code; its name is for messages


def _key(job) -> str:
    """What is known of a compile before it runs; raises :class:`Uncacheable`."""
    options = [
        f"{f.name}={getattr(job, f.name)!r}"
        for f in dataclasses.fields(job)
        if f.name not in _KEYED_FIELDS + ("argtypes", "chain", "kwtypes")
    ]
    parts = [
        FORMAT,
        _package_versions(),
        job.target.cache_tag,
        function_digest(job.func),
        [type_digest(t) for t in job.argtypes],
        [(k, type_digest(t)) for k, t in job.kwtypes],
        [context_digest(ctx) for ctx in job.chain],
        options,
        settings.code_settings(),  # OVERDUB_REROUTE: which operators become calls, so which edges are recorded
    ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _path(root: pathlib.Path, key: str) -> pathlib.Path:
    return root / key[:2] / f"{key}{_SUFFIX}"


# --- load and store -------------------------------------------------------------------------------------


def load(job, kernel) -> bool:
    """Give ``kernel`` (being built on this thread) the launcher of ``job``'s cache entry, re-checking the
    entry's facts here first; False on a miss (then ``kernel`` holds edges of a partial check: discard it)."""
    root = directory()
    if root is None:
        return False
    try:
        path = _path(root, _key(job))
    except Uncacheable:
        runtime.count("disk_misses")
        return False
    entry = _read(path)
    if entry is None:
        runtime.count("disk_misses")
        return False
    changed = replay(job, entry["facts"])
    if changed is not None:
        log.debug("the disk cache entry of %s is not used: %s", job.call(), changed)
        runtime.count("disk_misses")
        return False
    try:
        kernel.launcher = job.target.launcher_from_payload(entry["payload"], job.argtypes)
    except Exception as exc:  # an entry that unpickled but does not load: as corrupt
        _corrupt(path, f"its code does not load ({type(exc).__name__}: {exc})")
        runtime.count("disk_misses")
        return False
    if kernel.launcher is None:  # it lacks what this process needs (a CUDA launch: the cubin)
        log.debug("the disk cache entry of %s is not used: it holds no code this use loads", job.call())
        runtime.count("disk_misses")
        return False
    kernel.needs |= entry["needs"]
    _touch(path)
    runtime.count("disk_hits")
    return True


def store(job, kernel) -> None:
    """Write the freshly compiled ``kernel`` of ``job`` to the cache, unless something it consulted cannot be
    checked by another process (counted as ``disk_uncacheable``)."""
    root = directory()
    if root is None or not kernel.valid:
        return
    try:
        key = _key(job)
        entry = {"call": job.call(), "facts": record(job, kernel), "needs": set(kernel.needs)}
        payload = job.target.launcher_payload(kernel.launcher)
        if payload is None:
            raise Uncacheable(f"the {job.target.label} target cannot serialise its code")
        entry["payload"] = payload
        body = _pickled(entry)
    except (Uncacheable, pickle.PicklingError) as exc:
        log.debug("%s is not stored in the disk cache: %s", job.call(), exc)
        runtime.count("disk_uncacheable")
        return
    except Exception as exc:  # storing is best effort: the compiled kernel runs all the same
        log.warning("overdub: %s is not stored in the disk cache: %s: %s", job.call(), type(exc).__name__, exc)
        runtime.count("disk_uncacheable")
        return
    data = _MAGIC + hashlib.sha256(body).digest() + body
    _write(_path(root, key), data)
    _bound(root, len(data), _limit())


def _pickled(entry: dict) -> bytes:
    try:
        return pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    except (TypeError, AttributeError, pickle.PicklingError) as exc:  # what pickle raises for an unpicklable object
        raise Uncacheable(f"its entry does not pickle ({exc})") from None


# --- files ----------------------------------------------------------------------------------------------


def _read(path: pathlib.Path) -> dict | None:
    try:
        data = path.read_bytes()
    except OSError:  # no entry (or unreadable): a miss
        return None
    header = len(_MAGIC) + 32
    if len(data) < header or data[: len(_MAGIC)] != _MAGIC:
        return _corrupt(path, "it is truncated or not an overdub cache entry")
    body = data[header:]
    if hashlib.sha256(body).digest() != data[len(_MAGIC) : header]:
        return _corrupt(path, "its checksum does not match (truncated or overwritten)")
    try:
        entry = pickle.loads(body)
    except Exception as exc:  # whatever a damaged pickle raises
        return _corrupt(path, f"it does not unpickle ({type(exc).__name__}: {exc})")
    if not isinstance(entry, dict) or not {"facts", "payload", "needs"} <= entry.keys():
        return _corrupt(path, "it lacks fields")
    return entry


def _corrupt(path: pathlib.Path, why: str) -> None:
    warnings.warn(
        f"overdub: the disk cache entry {path} is unusable: {why}; compiling again", RuntimeWarning, stacklevel=2
    )
    _remove(path)
    return None


def _write(path: pathlib.Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory, renamed into place."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=_SUFFIX, dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except BaseException:
            _remove(pathlib.Path(temporary))
            raise
    except OSError as exc:  # a read-only or full disk: the kernel still runs, uncached
        log.warning("overdub: cannot write the disk cache entry %s: %s", path, exc)


def _touch(path: pathlib.Path) -> None:
    try:
        os.utime(path)
    except OSError:  # removed meanwhile by another process: nothing to keep fresh
        pass


def _remove(path: pathlib.Path) -> None:
    try:
        path.unlink()
    except OSError:  # already gone
        pass


def _entries(root: pathlib.Path) -> list[pathlib.Path]:
    """The entries (not the temporary files of writers)."""
    if not root.is_dir():
        return []
    return [path for path in root.glob(f"*/*{_SUFFIX}") if not path.name.startswith(".tmp-")]


def _bound(root: pathlib.Path, written: int, limit: int) -> None:
    """Keep the directory within ``limit`` bytes after this process wrote ``written`` more. A scan
    (:func:`_trim`) stats every entry, so it is not made on every store: a process scans on its first store
    to a directory, whenever the size its last scan found plus what it has written since passes the limit,
    and when its last scan is more than :data:`_RESCAN_SECONDS` old (other processes write too)."""
    with _usage_lock:
        found = _usage.get(root)
        now = time.monotonic()
        if found is not None and found[0] + written <= limit and now - found[1] < _RESCAN_SECONDS:
            _usage[root] = (found[0] + written, found[1])
            return
        _usage[root] = (_trim(root, limit), now)


def _trim(root: pathlib.Path, limit: int) -> int:
    """Remove the least recently used entries (by modification time, which a hit refreshes) while the
    directory holds more than ``limit`` bytes; the bytes it holds after."""
    sizes = []
    for path in _entries(root):
        try:
            stat = path.stat()
        except OSError:  # removed by another process meanwhile
            continue
        sizes.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in sizes)
    if total <= limit:
        return total
    for _, size, path in sorted(sizes, key=lambda item: item[0]):
        _remove(path)
        total -= size
        if total <= limit * _TRIMMED_TO:
            break
    return total
