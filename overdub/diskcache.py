"""The on-disk kernel cache: a new process launches what earlier ones compiled, and never stale code.

numba's own ``cache=True`` keys an entry by the kernel's file and trusts it while that file is unchanged, so
an edited callee in another module leaves it stale (numba issues #1833, #9483). Here an entry is *found* by
what is known before compiling -- the kernel's own code, its argument types, its context chain, the target
(and its compute capability or CPU), every field of the compile job, and the versions of overdub (a digest of
its source), numba, numba-cuda, llvmlite, numpy and Python -- and *accepted* only after every other thing
the compile consulted is re-checked in this process (:mod:`overdub.fingerprint`): each dispatch is resolved
again here and must reach a method with the same code, each global must hold the same value, each function
compiled must have the same code (and, for code numba compiles itself -- an ``@njit`` helper, an
``@overload`` -- everything that code reads). The re-check goes through the calls a compile makes, so the
loaded kernel holds the same edges as a freshly compiled one and is invalidated in this process in the same
way. A kernel whose compile consulted something without a content digest is compiled and not stored.

Files: ``$OVERDUB_CACHE_DIR`` (default: the per-user cache directory, ``~/.cache/overdub``), refused (with one
warning) unless it is the user's own and writable by no one else. A key is a directory holding up to
:data:`VERSIONS` entries -- one per set of facts, so a program alternating between definitions finds each --
tried most recently used first. An entry is written to a temporary file and renamed into place (concurrent
writers never expose half a file); it is a pickle, authenticated by an HMAC with a per-user secret (the file
``secret`` in the directory, created 0600), checked before anything is unpickled: a file that does not pass
is a miss with a warning, and is removed; one that names what this process lacks -- a class of another
process's ``__main__``, which a spawned worker's ``__mp_main__`` need not define -- is a miss here, quietly, and
stays for the processes that can use it. The directory is kept under ``$OVERDUB_CACHE_SIZE`` megabytes
(default 1024) by removing the least recently used entries (a hit touches its file) and the temporary files
of writers that died; a process measures the directory on its first store, when what it wrote since would
pass the bound, and at least every ten seconds while it stores. ``OVERDUB_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import importlib.metadata
import io
import logging
import os
import pathlib
import pickle
import platform
import secrets
import stat
import sys
import tempfile
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

from . import settings, world
from .bindings import Guarded
from .digests import Uncacheable, function_digest, type_digest
from .facts import Fact
from .fingerprint import context_digest, record, replay
from .registry import resolve_reference
from .runtime import runtime

if TYPE_CHECKING:
    from .compiler import Kernel
    from .job import CompileJob

log = logging.getLogger("overdub")

__all__ = ["directory", "load", "store"]

FORMAT = 3  # 3: a key is a directory of versions; entries signed with the user's secret; numba-compiled code deep
_MAGIC = b"ODKC"
_SUFFIX = ".odk"
_TEMPORARY = ".tmp-"
_SECRET = "secret"
VERSIONS = 8  # entries kept per key (a program alternating between definitions, workers at different versions)
_STALE_TEMPORARY_SECONDS = 600.0  # a writer's temporary file this old belongs to a writer that died
_TRIMMED_TO = 0.8  # after trimming, the directory holds at most this fraction of the limit
_RESCAN_SECONDS = 10.0  # a process scans the directory's size again at least this often while it stores
# directory -> (bytes it holds by this process's last scan and writes, scan time)
_usage: dict[pathlib.Path, tuple[int, float]] = {}
runtime.register_cache(f"{__name__}._usage", _usage)  # cleared: the next store measures the directory again
_usage_lock = threading.Lock()
# the configured directory -> (its versioned root, the secret), or None where refused
_directories: dict[str, tuple[pathlib.Path, bytes] | None] = {}
runtime.register_cache(f"{__name__}._directories", _directories)  # cleared: checked again at the next use
_versions: str | None = None
runtime.register_cache(f"{__name__}._versions", kept="the versions installed: facts of the process")


def directory() -> pathlib.Path | None:
    """The cache directory, or None when ``OVERDUB_CACHE`` turns the cache off or the directory is refused."""
    opened = _opened()
    return None if opened is None else opened[0]


def _opened() -> tuple[pathlib.Path, bytes] | None:
    """(the versioned root, the user's secret), checked once per process and directory; None when off or
    refused (one warning per directory)."""
    if not settings.CACHE.value():
        return None
    base: str = settings.CACHE_DIR.value()
    if base not in _directories:
        try:
            _directories[base] = _open(pathlib.Path(base))
        except OSError as exc:  # PermissionError: not the user's own
            warnings.warn(f"overdub: the disk cache is off: {exc}", RuntimeWarning, stacklevel=3)
            _directories[base] = None
    return _directories[base]


def _open(base: pathlib.Path) -> tuple[pathlib.Path, bytes]:
    """Make (or check) the cache directory and read (or make) the secret; raises where it is not the user's."""
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_private(base, "directory")
    root = base / f"v{FORMAT}"
    root.mkdir(mode=0o700, exist_ok=True)
    _check_private(root, "directory")
    return root, _secret(base)


def _check_private(path: pathlib.Path, what: str) -> None:
    """Refuse ``path`` unless this user owns it and no one else may write it (an entry another user can plant
    runs code in this process when loaded)."""
    info = os.stat(path)
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PermissionError(f"the cache {what} {path} is not owned by this user (uid {os.getuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(
            f"the cache {what} {path} is writable by other users (mode {stat.filemode(info.st_mode)}): "
            f"`chmod go-w` it, or set OVERDUB_CACHE_DIR to a directory of your own"
        )


def _secret(base: pathlib.Path) -> bytes:
    """The per-user key entries are signed with: ``base/secret``, made once (0600, written whole before it
    is linked into place, so a racing process reads all of it or makes its own and loses the link)."""
    path = base / _SECRET
    if not path.exists():
        fd, temporary = tempfile.mkstemp(prefix=_TEMPORARY, dir=base)  # mkstemp makes it 0600
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(secrets.token_bytes(32))
            try:
                os.link(temporary, path)
            except FileExistsError:  # another process made it first: use theirs
                pass
        finally:
            _remove(pathlib.Path(temporary))
    info = os.stat(path)
    if info.st_mode & 0o077:
        raise PermissionError(f"the cache's secret {path} is readable or writable by others: remove it")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PermissionError(f"the cache's secret {path} is not owned by this user")
    key = path.read_bytes()
    if len(key) < 32:
        raise PermissionError(f"the cache's secret {path} is damaged: remove it")
    return key


def _limit() -> int:
    limit: int = settings.CACHE_SIZE.value()
    return limit


# --- the key --------------------------------------------------------------------------------------------


_BUILT_FROM = frozenset({".py", ".c", ".so", ".pyd"})


def source_digest(package: pathlib.Path) -> str:
    """A digest of ``package``'s code by content: its Python modules, and its C extensions' sources and built
    modules -- compiled kernels call the CPU target's runner and lay out what they share with it (a pass's record,
    a frame) as the C code does, so a runner changed alone must not load code compiled for the old one."""
    source = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in _BUILT_FROM and p.is_file()):
        source.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return source.hexdigest()


def _package_versions() -> str:
    """The versions of what turns a kernel into code: overdub's own code (by content: :func:`source_digest`),
    numba, numba-cuda, llvmlite, numpy, Python."""
    global _versions
    if _versions is None:
        versions = []
        for name in ("numba", "numba-cuda", "llvmlite", "numpy"):
            try:
                versions.append(f"{name}={importlib.metadata.version(name)}")
            except importlib.metadata.PackageNotFoundError:
                versions.append(f"{name}=none")
        digest = source_digest(pathlib.Path(__file__).parent)
        _versions = "|".join([digest, *versions, sys.version, platform.machine()])
    return _versions


_KEYED_FIELDS = ("func_ref", "name")  # the function is keyed by its code; its name is for messages


def _key(job: CompileJob) -> str:
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


def _key_directory(root: pathlib.Path, key: str) -> pathlib.Path:
    return root / key[:2] / key


def _versions_of(folder: pathlib.Path) -> list[pathlib.Path]:
    """The entries of one key, most recently used first."""
    found = []
    try:
        names = os.listdir(folder)
    except OSError:  # no entry of this key
        return []
    for name in names:
        if name.endswith(_SUFFIX) and not name.startswith(_TEMPORARY):
            path = folder / name
            try:
                found.append((path.stat().st_mtime, path))
            except OSError:  # removed by another process meanwhile
                continue
    return [path for _, path in sorted(found, key=lambda item: item[0], reverse=True)]


# --- load and store -------------------------------------------------------------------------------------


def load(job: CompileJob, kernel: Kernel) -> bool:
    """Give ``kernel`` (being built on this thread) the launcher of one of ``job``'s cache entries, the most
    recently used whose facts hold here; False on a miss (then ``kernel`` may hold edges of a partial check:
    discard it)."""
    opened = _opened()
    if opened is None:
        return False
    root, secret = opened
    try:
        candidates = _versions_of(_key_directory(root, _key(job)))
    except Uncacheable:
        candidates = []
    for index, path in enumerate(candidates):
        entry = _read(path, secret)
        if entry is None:
            continue
        last = index == len(candidates) - 1
        # each version but the last is checked aside, so that the kernel gets the edges of the one it loads only
        changed = replay(job, entry["facts"]) if last else _checked_aside(job, entry["facts"])
        if changed is not None:
            log.debug("the disk cache entry %s of %s is not used: %s", path.name, job.call(), changed)
            continue
        if not last and replay(job, entry["facts"]) is not None:
            break  # changed since it was checked aside (another thread): compile
        if _loaded(job, kernel, entry, path):
            _touch(path)
            runtime.count("disk_hits")
            return True
        break
    runtime.count("disk_misses")
    return False


def _checked_aside(job: CompileJob, facts: list[Fact]) -> str | None:
    """:func:`replay` for a node thrown away after: whether the facts hold, with no edge left on the kernel."""
    scratch = Guarded()
    try:
        with world.building(scratch):
            return replay(job, facts)
    finally:
        world.retire([scratch])


def _loaded(job: CompileJob, kernel: Kernel, entry: dict[str, Any], path: pathlib.Path) -> bool:
    try:
        code = job.target.deserialized(entry["payload"], job.argtypes)
        if code is None:  # it lacks what this process needs (a CUDA launch: the cubin)
            log.debug("the disk cache entry of %s is not used: it holds no code this use loads", job.call())
            return False
        kernel.code, kernel.launcher = code, job.target.link(code)
    except Exception as exc:  # an entry that unpickled but does not load: as corrupt
        _corrupt(path, f"its code does not load ({type(exc).__name__}: {exc})")
        return False
    kernel.needs |= entry["needs"]
    return True


def store(job: CompileJob, kernel: Kernel) -> None:
    """Write the freshly compiled ``kernel`` of ``job`` to the cache, unless something it consulted cannot be
    checked by another process (counted as ``disk_uncacheable``): as one more version of its key, named by
    its facts (a version with the same facts is replaced), the oldest beyond :data:`VERSIONS` removed."""
    opened = _opened()
    if opened is None or not kernel.valid:
        return
    root, secret = opened
    try:
        key = _key(job)
        entry: dict[str, Any] = {"call": job.call(), "facts": record(job, kernel), "needs": set(kernel.needs)}
        payload = job.target.serialized(kernel.code)  # the target's code of it
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
    folder = _key_directory(root, key)
    version = hashlib.sha256(repr(entry["facts"]).encode()).hexdigest()[:32]
    data = _sealed(secret, key, body)
    _write(folder / f"{version}{_SUFFIX}", data)
    for old in _versions_of(folder)[VERSIONS:]:
        _remove(old)
    _bound(root, len(data), _limit())


def _pickled(entry: dict[str, Any]) -> bytes:
    try:
        return pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    except (TypeError, AttributeError, pickle.PicklingError) as exc:  # what pickle raises for an unpicklable object
        raise Uncacheable(f"its entry does not pickle ({exc})") from None


def _signature(secret: bytes, key: str, body: bytes) -> bytes:
    return hmac.new(secret, key.encode() + b"\0" + body, hashlib.sha256).digest()


def _sealed(secret: bytes, key: str, body: bytes) -> bytes:
    """An entry's file: the magic, the HMAC of its key and body under the user's secret, the body."""
    return _MAGIC + _signature(secret, key, body) + body


# --- files ----------------------------------------------------------------------------------------------


def _read(path: pathlib.Path, secret: bytes | None = None) -> dict[str, Any] | None:
    """The entry at ``path``, its signature checked (with ``secret``, by default the cache directory's) before
    it is unpickled; None (a miss) where there is none, with a warning where it is damaged or was not written
    by this user's overdub."""
    if secret is None:
        opened = _opened()
        if opened is None:
            return None
        secret = opened[1]
    try:
        data = path.read_bytes()
    except OSError:  # no entry (or unreadable): a miss
        return None
    header = len(_MAGIC) + 32
    if len(data) < header or data[: len(_MAGIC)] != _MAGIC:
        _corrupt(path, "it is truncated or not an overdub cache entry")
        return None
    body = data[header:]
    if not hmac.compare_digest(_signature(secret, path.parent.name, body), data[len(_MAGIC) : header]):
        _corrupt(path, "its signature does not match (truncated, overwritten, or not written by you)")
        return None
    try:
        entry = _unpickled(body)
    except _NotHere as exc:  # sound, but of another process: a miss here, and the entry stays for its writer
        log.debug("the disk cache entry %s is not used: %s", path, exc)
        return None
    except Exception as exc:  # whatever a damaged pickle raises
        _corrupt(path, f"it does not unpickle ({type(exc).__name__}: {exc})")
        return None
    if not isinstance(entry, dict) or not {"facts", "payload", "needs"} <= entry.keys():
        _corrupt(path, "it lacks fields")
        return None
    return entry


class _NotHere(Exception):
    """An entry names something -- a module, a class, a generic function -- that does not exist in this
    process: one of another process's ``__main__`` (a class defined under ``if __name__ == "__main__":``, which
    a spawned worker's ``__mp_main__`` never defines), or of a module this process cannot import."""


class _Unpickler(pickle.Unpickler):
    """Unpickles an entry; a name it cannot find here raises :class:`_NotHere` (not a damaged entry)."""

    def find_class(self, module: str, name: str) -> object:
        try:
            found = super().find_class(module, name)
        except (ImportError, AttributeError) as exc:  # ModuleNotFoundError; "Can't get attribute 'Q' on ..."
            raise _NotHere(
                f"it names {module}.{name}, which this process lacks ({type(exc).__name__}: {exc})"
            ) from None
        return _resolving if found is resolve_reference else found


def _resolving(module: str, qualname: str) -> object:
    """:func:`~overdub.registry.resolve_reference` (how a generic function or a context pickles by name), a
    name it cannot find raising :class:`_NotHere`."""
    try:
        return resolve_reference(module, qualname)
    except (ImportError, AttributeError) as exc:
        raise _NotHere(
            f"it names {module}.{qualname}, which this process lacks ({type(exc).__name__}: {exc})"
        ) from None


def _unpickled(body: bytes) -> object:
    return _Unpickler(io.BytesIO(body)).load()


def _corrupt(path: pathlib.Path, why: str) -> None:
    warnings.warn(
        f"overdub: the disk cache entry {path} is unusable: {why}; compiling again", RuntimeWarning, stacklevel=2
    )
    _remove(path)
    return None


def _write(path: pathlib.Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory, renamed into place."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=_TEMPORARY, suffix=_SUFFIX, dir=path.parent)
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
    """Remove the temporary files of writers that died (older than :data:`_STALE_TEMPORARY_SECONDS`), then the
    least recently used entries (by modification time, which a hit refreshes) while the directory holds more
    than ``limit`` bytes, a live writer's temporary files counted; the bytes it holds after."""
    sizes, total, now = [], 0, time.time()
    for path in root.glob(f"*/*/*{_SUFFIX}") if root.is_dir() else ():
        try:
            info = path.stat()
        except OSError:  # removed by another process meanwhile
            continue
        if not path.name.startswith(_TEMPORARY):
            sizes.append((info.st_mtime, info.st_size, path))
        elif now - info.st_mtime > _STALE_TEMPORARY_SECONDS:
            _remove(path)
            continue
        total += info.st_size
    if total <= limit:
        return total
    for _, size, path in sorted(sizes, key=lambda item: item[0]):
        _remove(path)
        total -= size
        if total <= limit * _TRIMMED_TO:
            break
    return total
