"""``od.precompile``: a program's kernels compiled before their first launch, in parallel, into the disk cache.

A program's first launches compile its kernels one after another, and threads cannot overlap them: numba's
compiler holds a global lock. ``od.precompile`` takes the calls -- each kernel with its arguments' values or numba
types, as ``od.code_ptx`` does -- and shares them, round robin, among processes: this one and *worker processes*.
On Linux the workers are forks of this one (a few milliseconds each, numba already started, every definition
already there: a def of ``__main__`` compiles in a worker too): a forked worker only compiles, with what needs no
driver -- numba's CPU compiler; NVVM and nvJitLink for the CUDA target, which asks the driver what it must know
before the fork (``Target.fork_worker``). Elsewhere -- a system without a safe fork, a CUDA toolkit whose linker
is the driver's -- each is spawned (a ``concurrent.futures.ProcessPoolExecutor`` of one process) and imports numba
and overdub first. A worker compiles
its share into the disk cache, whose entries are written whole and renamed into place (:mod:`overdub.diskcache`:
concurrent writers are safe); this process compiles its own share meanwhile, then loads each worker's entry, its
facts re-checked here as any load's are. The first launch of each call finds its kernel in memory; a later process
finds it on disk (a warm start).

Each call takes the first tier that has it:

* **in memory** -- compiled or loaded in this process already;
* **on disk** -- loaded from the disk cache (:func:`overdub.compiler.loaded_kernel`): a warm start's
  ``od.precompile`` starts no process;
* **in a worker** -- a forked worker compiles the call as this process would; a spawned one adopts this
  process's definitions (the snapshot of :mod:`overdub.travel.snapshots`: a method redefined or added at run
  time), imports the kernel by its module and qualified name, compiles it for the call's argument types,
  target, context and state type; either stores it, and this process loads the entry;
* **here** -- compiled in this process: its share; every call with ``workers=1`` or where the disk cache is
  off; a call whose kernel a spawned worker cannot import by name (a def of ``__main__``, which a worker
  imports anew; a closure; a def made by ``exec``); and a call whose worker left no entry usable here (it could not be
  stored; the compile or the worker failed; the worker's import of the kernel differs from this process's).

A spawned worker compiles its own import of the kernel, never a copy of this process's def sent by value: an entry
written for a def that arrived by value is not loaded for the module's own def (``FunctionFact`` of
:mod:`overdub.fingerprint`), and ``__main__`` is another module in a worker. Whatever a worker made, this
process's load decides.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import multiprocessing
import os
import pickle
import select
import signal
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import compiler, diskcache, dropin, world
from .call import KernelCall, check_call
from .context import Context
from .job import CompileError, CompileJob
from .registry import reference_to, resolve_reference
from .runtime import runtime
from .travel import arrival, load, snapshots

if TYPE_CHECKING:
    from .targets import Target

log = logging.getLogger("overdub")

__all__ = ["precompile", "Precompiled", "PrecompiledCall"]

load()  # what ships code to other processes, its reducers of generic functions, contexts and struct classes

IN_MEMORY = "in memory"
LOADED = "loaded from the disk cache"
IN_WORKER = "compiled in a worker"
HERE = "compiled here"


@dataclass(frozen=True)
class PrecompiledCall:
    """What ``od.precompile`` did for one call: ``call`` names the kernel and its argument types;
    ``how`` is ``"in memory"``, ``"loaded from the disk cache"``, ``"compiled in a worker"`` or ``"compiled
    here"``; ``process`` is the id of the process that compiled or loaded it; ``note`` says why a call was
    compiled here rather than in a worker."""

    call: str
    how: str
    process: int
    note: str = ""

    def __str__(self) -> str:
        where = f" (process {self.process})" if self.how == IN_WORKER else ""
        return f"{self.call}: {self.how}{where}" + (f" -- {self.note}" if self.note else "")


class Precompiled(list[PrecompiledCall]):
    """The calls ``od.precompile`` made ready, one :class:`PrecompiledCall` each, in the order given;
    ``spawned`` is the number of worker processes it started (0: none)."""

    def __init__(self, calls: Iterable[PrecompiledCall], spawned: int) -> None:
        super().__init__(calls)
        self.spawned = spawned

    def __str__(self) -> str:
        counts: dict[str, int] = {}
        for each in self:
            counts[each.how] = counts.get(each.how, 0) + 1
        summary = ", ".join(f"{n} {how}" for how, n in counts.items()) or "nothing to do"
        head = f"od.precompile: {len(self)} kernel calls, {self.spawned} worker processes started: {summary}"
        return "\n".join([head, *(f"  {each}" for each in self)])

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's text display
        printer.text(str(self))


@dataclass(frozen=True)
class _ByName:
    """A call as a worker process makes it again: the kernel by its module and qualified name, the rest by
    value (numba types, a target and a context pickle as what makes them in another process)."""

    module: str
    qualname: str
    argtypes: tuple[object, ...]
    target: Target
    context: Context | tuple[Context, ...] | None
    state: object  # the numba type of the launch's state, or None

    def call(self) -> KernelCall:
        kernel = resolve_reference(self.module, self.qualname)
        return KernelCall.of(kernel, self.argtypes, self.target, self.context, self.state, typed=True)


@dataclass(frozen=True)
class _Answer:
    """A worker's answer for one call: ``how`` (:data:`IN_WORKER`, :data:`LOADED`, or None where it left no
    usable entry, then ``note`` says why) and its process id."""

    how: str | None
    note: str
    process: int


def precompile(
    calls: Iterable[tuple[object, Sequence[object]]],
    *,
    target: str | Target | None = None,
    context: Context | tuple[Context, ...] | None = None,
    state: object = None,
    workers: int | None = None,
) -> Precompiled:
    """Compile the kernel ``calls`` -- ``(kernel, args)`` pairs, ``args`` the values a launch passes or their
    numba types (``od.float32[::1]``) -- in parallel processes into the disk cache, and load them into this
    process: their first launches compile nothing, nor do a later process's (a warm start).

    ``target``, ``context`` and ``state`` (a value or a numba type) are ``od.cuda``'s; an ``od.jit`` kernel is
    compiled as its launches compile it (its target, context and compile options). ``workers``: how many
    processes compile, this one included (default: one per call to compile, at most one per CPU);
    ``workers=1`` compiles here, one call after another. On Linux the workers are forks of this process;
    elsewhere they are spawned (a script calls ``od.precompile`` under ``if __name__ == "__main__":``), import
    each kernel by its module and qualified name, and kernels they cannot import (defs of ``__main__``,
    closures) are compiled here.

    Each call is checked as a launch checks it before anything compiles (a TypeError naming the kernel). A
    call that fails to compile raises a :class:`CompileError` naming every failed call, after the others
    are compiled and cached. Returns what happened to each call (:class:`Precompiled`)."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"od.precompile(workers={workers!r}): give a positive number of processes, or None")
    pending: dict[CompileJob, KernelCall] = {}
    for kernel, args in _pairs(calls):
        call = _call_of(kernel, args, target, context, state)
        pending.setdefault(call.job, call)
    done = {job: _found(call) for job, call in pending.items()}
    to_compile = [call for job, call in pending.items() if done[job] is None]
    failures: dict[CompileJob, str] = {}
    timing: dict[str, float] = {}
    processes = min(len(to_compile), workers or os.cpu_count() or 1)
    setups = forks(to_compile) if processes > 1 else None  # asked once: a CUDA target's asks the driver
    if workers is None and len(to_compile) > 1 and diskcache.directory() is not None:
        # the calls compiled here first say what a compile costs, and so whether workers would pay: the
        # second one's time, as the first pays the compiler's own start (NVVM and libdevice loaded, numba's
        # typing of the kernel language), which would make workers look worth starting where they are not
        # (16 of them took 6.7 s for part 7's 20 kernels on the H200 host, against 2.8 s compiling here). Where
        # the workers are forks and enough calls are left, the first one's time is enough: a fork costs
        # milliseconds, so a worker too many costs little, and the second compile here would delay every
        # worker by a compile (0.13 s for part 7's CPU kernels on a 16-core host)
        timed = 1 if setups is not None and len(to_compile) > FORK_AFTER_ONE else 2
        clock = time.perf_counter()
        for call in to_compile[:timed]:
            started = time.perf_counter()
            done[call.job] = _compiled_here(call, "", failures)
            per_call = time.perf_counter() - started
        del to_compile[:timed]
        timing = {f"{timed} timing {'compile' if timed == 1 else 'compiles'} here": time.perf_counter() - clock}
        startup = FORK_STARTUP if setups is not None else _startup(call)
        cpus = os.cpu_count() or 1
        processes = min(len(to_compile), worth_it(len(to_compile), per_call, startup, cpus, setups is not None))
    if processes <= 1:
        setups = None
    forking = setups is not None
    here, shares, notes = _assigned(to_compile, processes, forking)
    with contextlib.ExitStack() as stack:
        spawned, clock = time.time(), time.perf_counter()
        futures: list[Any] = (
            [_forked(stack, [call for call, _ in share], setups) for share in shares]
            if setups is not None
            else _started(stack, [[by_name for _, by_name in share if by_name is not None] for share in shares])
        )
        phases = {"workers started": time.perf_counter() - clock}
        for call in here:  # while the workers start
            done[call.job] = _compiled_here(call, notes.get(call.job, ""), failures)
        phases["its own share compiled"] = time.perf_counter() - clock - sum(phases.values())
        ready: list[float] = []
        waited = 0.0
        for share, future in zip(shares, futures):
            started = time.perf_counter()
            at, answers = _answers(future, len(share))
            waited += time.perf_counter() - started
            ready += [at] if at else []
            for (call, _), answer in zip(share, answers):
                done[call.job], notes[call.job] = _loaded(call, answer)
        phases["answers waited for"] = waited
        phases["workers' entries loaded"] = time.perf_counter() - clock - sum(phases.values())
        log.debug(
            "od.precompile: %d %s workers, %s",
            len(shares),
            "forked" if forking else "spawned",
            ", ".join(f"{phase} in {seconds * 1e3:.0f} ms" for phase, seconds in {**timing, **phases}.items()),
        )
        if ready and not forking:  # how long spawned workers took to start, for the next od.precompile's choice
            _note_startup(shares[0][0][0], max(ready) - spawned)
    for call in to_compile:
        if done[call.job] is None and call.job not in failures:  # a worker left no entry usable here
            done[call.job] = _compiled_here(call, notes[call.job], failures)
    if failures:
        raise CompileError(
            f"od.precompile: {len(failures)} of {len(pending)} kernel calls failed to compile (the others are "
            f"compiled and cached):\n\n" + "\n\n".join(failures.values())
        )
    report = Precompiled([each for each in done.values() if each is not None], len(shares))
    log.info("%s", report)
    return report


def _pairs(calls: Iterable[tuple[object, Sequence[object]]]) -> list[tuple[object, tuple[object, ...]]]:
    pairs = []
    for item in calls:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], (tuple, list))):
            raise TypeError(
                f"od.precompile takes (kernel, args) pairs, args a tuple of values or numba types, not {item!r:.80}"
            )
        pairs.append((item[0], tuple(item[1])))
    return pairs


def _call_of(
    kernel: object,
    args: tuple[object, ...],
    target: str | Target | None,
    context: Context | tuple[Context, ...] | None,
    state: object,
) -> KernelCall:
    """The call, checked and described as a launch's would be (an ``od.jit`` kernel's on its own target and
    context)."""
    check_call(kernel, args)
    if isinstance(kernel, dropin.Kernel):
        target, context = kernel.target, kernel.context
    return KernelCall.of(kernel, args, target, context, state, typed=True)


def _found(call: KernelCall) -> PrecompiledCall | None:
    """The call's kernel from memory or the disk cache, or None: it needs compiling."""
    before = runtime.kernels.get(call.job)
    kernel = compiler.loaded_kernel(call.job)
    if kernel is None:
        return None
    return PrecompiledCall(call.job.call(), IN_MEMORY if kernel is before else LOADED, os.getpid())


_Share = list[tuple[KernelCall, "_ByName | None"]]


def forks(calls: Sequence[KernelCall]) -> tuple[Callable[[], None], ...] | None:
    """What forked workers for ``calls`` run first, each target's (``Target.fork_worker``); None where some
    target cannot compile in a fork (a driver it would ask, macOS's fork): then the workers are spawned."""
    setups: dict[int, Callable[[], None]] = {}
    for call in calls:
        if id(call.target) not in setups:
            setup = call.target.fork_worker()
            if setup is None:
                return None
            setups[id(call.target)] = setup
    return tuple(setups.values())


ANSWER_WITHIN = 120.0
"""Seconds a forked worker may take per call of its share before it is taken for hung and killed (its calls are
then compiled here)."""

FORK_AFTER_ONE = 3
"""Calls left after the first one compiled here from which forked workers are chosen on its time alone."""

FORK_STARTUP = 0.05
"""Seconds a forked worker takes to be ready, for the choice of how many to start (a fork of a process of a
few hundred megabytes, then its first compile's own start)."""


def _assigned(
    calls: list[KernelCall], processes: int, forking: bool = False
) -> tuple[list[KernelCall], list[_Share], dict[CompileJob, str]]:
    """Which process compiles each call: the calls this process compiles, a share for each worker process (of
    ``processes`` in all, this one included: every ``processes``-th call a worker can compile, round
    robin), and why a call is not a worker's. A forked worker compiles any call; a spawned one, what it can
    import by name (:func:`_by_name`)."""
    if processes <= 1:
        return calls, [], {}
    if diskcache.directory() is None:
        why = "the disk cache is off (OVERDUB_CACHE=0, or its directory refused): workers could not hand code back"
        return calls, [], {call.job: why for call in calls}
    shippable: _Share = []
    here: list[KernelCall] = []
    notes: dict[CompileJob, str] = {}
    for call in calls:
        if forking:
            shippable.append((call, None))
            continue
        by_name, why = _by_name(call)
        if by_name is None:
            here.append(call)
            notes[call.job] = why
        else:
            shippable.append((call, by_name))
    here += [call for call, _ in shippable[::processes]]
    shares = [shippable[i::processes] for i in range(1, processes)]
    return here, [share for share in shares if share], notes


def _by_name(call: KernelCall) -> tuple[_ByName | None, str]:
    """``call`` as a worker makes it again, or why it cannot: the kernel must be what its module's name names
    there (not a def of ``__main__``, nor one made inside a function), and the call must pickle."""
    kernel = call.kernel
    module, qualname = getattr(kernel, "__module__", None), getattr(kernel, "__qualname__", "")
    if module == "__main__":
        return None, f"a worker cannot import {qualname}: it is defined in __main__, which a worker imports anew"
    if "<locals>" in qualname or call.lifted is not None:
        return None, f"a worker cannot import {qualname}: it is defined inside a function"
    try:
        reference_to(kernel, module, qualname)
    except pickle.PicklingError:
        return None, f"a worker cannot import {qualname}: {module}.{qualname} does not name it"
    hidden = 0 if call.state is None else 1
    types = tuple(argument.type for argument in call.arguments)
    by_name = _ByName(
        str(module),
        qualname,
        types[hidden : hidden + len(call.args)],
        call.target,
        call.context,
        types[0] if hidden else None,
    )
    try:
        pickle.dumps(by_name)
    except Exception as exc:  # whatever pickling an argument type or a context raises
        return None, f"its call does not pickle for a worker ({type(exc).__name__}: {exc})"
    return by_name, ""


def _started(stack: contextlib.ExitStack, shares: list[list[_ByName]]) -> list[Future[tuple[float, list[_Answer]]]]:
    """A spawned process for each share (no fork of a process holding numba's and the driver's state), each
    with a pool of its own -- so each share runs in its own process -- compiling the share, then exiting;
    shut down on leaving ``stack``, not waiting for the processes' exit (a second: numba's objects torn
    down). Each process first adopts this process's definitions."""
    if not shares:
        return []
    snapshot = snapshots.snapshot()
    spawn = multiprocessing.get_context("spawn")
    futures = []
    for share in shares:
        pool = ProcessPoolExecutor(1, mp_context=spawn)
        stack.callback(pool.shutdown, wait=False, cancel_futures=True)
        futures.append(pool.submit(_compile_share, snapshot, share))
    return futures


class _ForkedWorker:
    """A fork of this process compiling a share into the disk cache, its answers coming back through a pipe.
    The child compiles and leaves at once (``os._exit``: no exit handler of this process runs twice); it only
    compiles -- no launch, no driver -- so the runner's threads and a GPU context this process holds, which a
    fork does not copy, are never asked for."""

    def __init__(self, share: list[KernelCall], setups: Sequence[Callable[[], None]]) -> None:
        read, write = os.pipe()
        # forked holding the compiler's locks, which the child's compiles take again (re-entrant): another thread
        # compiling at the fork would leave them held in the child by a thread it does not have
        with share[0].target.compile_lock, world.lock, warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+ warns of forking with threads
            pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.close(read)
                for setup in setups:  # each target's (a CUDA worker: what the driver said, never to be asked)
                    setup()
                ready = time.time()
                answers = [_compile_in_worker(functools.partial(_same, call)) for call in share]
                with os.fdopen(write, "wb") as out:
                    pickle.dump((ready, answers), out)
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        self.pid, self.size = pid, len(share)
        self.pipe: int | None = read
        self.answer: tuple[float, list[_Answer]] | None = None

    def _read(self, seconds: float) -> bytes:
        """The worker's whole answer; a RuntimeError where it gives none within ``seconds`` (hung on something
        its fork copied in a state it cannot leave): then it is killed."""
        assert self.pipe is not None
        chunks: list[bytes] = []
        deadline = time.monotonic() + seconds
        with os.fdopen(self.pipe, "rb", buffering=0) as answers:
            self.pipe = None
            while select.select([answers], [], [], max(0.0, deadline - time.monotonic()))[0]:
                chunk = answers.read(1 << 16)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        raise RuntimeError(f"the forked worker {self.pid} gave no answer in {seconds:g} s: killed")

    def result(self) -> tuple[float, list[_Answer]]:
        """(when the worker was ready, its answers), once it has answered; a RuntimeError where it died first,
        or gave no answer within :data:`ANSWER_WITHIN` seconds a call (then it is killed)."""
        if self.pipe is not None:
            try:
                data = self._read(ANSWER_WITHIN * self.size)
            finally:
                _, status = os.waitpid(self.pid, 0)
            try:
                self.answer = pickle.loads(data)
            except Exception:  # nothing or half an answer: its exit status says how it ended
                raise RuntimeError(f"the forked worker {self.pid} ended without answering (status {status})") from None
        if self.answer is None:
            raise RuntimeError(f"the forked worker {self.pid} ended without answering")
        return self.answer

    def reap(self) -> None:
        """Wait for the worker where its answer was never read (an error here cut the precompile short)."""
        if self.pipe is not None:
            with contextlib.suppress(Exception):
                self.result()


def _same(call: KernelCall) -> KernelCall:
    return call


def _forked(
    stack: contextlib.ExitStack, share: list[KernelCall], setups: Sequence[Callable[[], None]]
) -> _ForkedWorker:
    worker = _ForkedWorker(share, setups)
    stack.callback(worker.reap)
    return worker


def _answers(future: Future[tuple[float, list[_Answer]]] | _ForkedWorker, size: int) -> tuple[float, list[_Answer]]:
    """(when the worker was ready: its clock's time, 0 where unknown; its answers for its share); where the
    process failed or died, that answer for each call."""
    try:
        return future.result()
    except Exception as exc:  # the process died (BrokenProcessPool), or its share did not pickle
        return 0.0, [_Answer(None, f"its worker failed ({type(exc).__name__}: {exc})", 0)] * size


def _compile_share(snapshot: snapshots.Token, share: list[_ByName]) -> tuple[float, list[_Answer]]:
    """In a worker process: adopt the sender's definitions, then compile (or load) each call of the share;
    with the time it was ready to (its imports and the adoption done)."""
    arrival.adopt(*snapshot)
    ready = time.time()
    return ready, [_compile_in_worker(by_name.call) for by_name in share]


# --- whether workers pay ------------------------------------------------------------------------------------

STARTUP_GUESS = 3.0
"""Seconds a worker process takes to be ready (spawned, overdub and the target imported, the definitions
adopted) where no od.precompile on this machine measured it yet: enough that a small program compiles here."""


def worth_it(calls: int, per_call: float, startup: float, cpus: int, forks: bool = False) -> int:
    """How many processes compile ``calls`` calls of ``per_call`` seconds each, this one included: the number
    whose estimated time -- workers starting (``startup``), then each process's share one after another, slowed
    where there are more processes than ``cpus`` -- is least, and 1 (no worker) unless that beats compiling here
    by a tenth. So od.precompile is never slower than compiling one call after another, by its estimates.
    Forked workers (``forks``) may outnumber the CPUs, up to twice: 19 calls on 16 CPUs take about 1.2 calls'
    time in 19 processes that share them, against 2 in 16 (spawned ones pay their start each)."""
    serial = calls * per_call
    best, best_time = 1, serial
    most = min(calls, 2 * cpus if forks else cpus)
    for processes in range(2, most + 1):
        estimate = startup + -(-calls // processes) * per_call * max(1.0, processes / cpus)
        if estimate < best_time:
            best, best_time = processes, estimate
    return best if best_time < 0.9 * serial else 1


def _startup_file() -> Any:
    root = diskcache.directory()
    return None if root is None else root / "precompile-startup.json"


def _startup(call: KernelCall) -> float:
    """The startup of a worker for ``call``'s target, as the last od.precompile that started some measured it."""
    path = _startup_file()
    try:
        return float(json.loads(path.read_text())[call.target.name]) if path is not None else STARTUP_GUESS
    except (OSError, ValueError, KeyError, TypeError):  # none measured yet, or unreadable: the guess
        return STARTUP_GUESS


def _note_startup(call: KernelCall, seconds: float) -> None:
    path = _startup_file()
    if path is None:
        return
    try:
        known = json.loads(path.read_text()) if path.exists() else {}
        known[call.target.name] = round(seconds, 3)
        path.write_text(json.dumps(known))
    except (OSError, ValueError):  # another process writing it, or no room: the next run guesses
        pass


def _compile_in_worker(make: Callable[[], KernelCall]) -> _Answer:
    """In a worker: the call ``make`` gives compiled (or loaded) and stored, and how."""
    before = runtime.stats()
    try:
        make().compiled()
    except Exception as exc:  # a compile error, or the kernel's module not importable here: compiled in the sender
        return _Answer(None, f"its compile in a worker failed ({_message(exc)})", os.getpid())
    after = runtime.stats()
    if after["disk_uncacheable"] > before["disk_uncacheable"]:
        return _Answer(None, "its compile consulted something the disk cache cannot store", os.getpid())
    return _Answer(IN_WORKER if after["compiles"] > before["compiles"] else LOADED, "", os.getpid())


def _loaded(call: KernelCall, answer: _Answer) -> tuple[PrecompiledCall | None, str]:
    """The call's kernel loaded here from the entry a worker made; else None and why (then it compiles here)."""
    if answer.how is None:
        return None, answer.note
    if compiler.loaded_kernel(call.job) is None:
        return None, "the entry its worker stored is not usable here (see the disk cache's debug log)"
    process = answer.process if answer.how == IN_WORKER else os.getpid()
    return PrecompiledCall(call.job.call(), answer.how, process), ""


def _compiled_here(call: KernelCall, note: str, failures: dict[CompileJob, str]) -> PrecompiledCall | None:
    """The call compiled in this process; None where it fails, the failure (naming the call) in ``failures``."""
    try:
        call.compiled()
    except Exception as exc:  # each failed call is named in the CompileError od.precompile raises at the end
        failures[call.job] = f"{call.job.call()}: {_message(exc)}"
        return None
    return PrecompiledCall(call.job.call(), HERE, os.getpid(), note)


def _message(exc: Exception) -> str:
    return str(exc) if isinstance(exc, CompileError) else f"{type(exc).__name__}: {exc}"
