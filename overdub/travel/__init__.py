"""The client's world travels with the work: overdub across processes (Dask, Ray, process pools, joblib).

A task run in another process imports the modules it names from files, which need not hold what this
process defined since: a method redefined by ``exec`` (a notebook cell, ``%autoreload``), a generic function
of ``__main__``, a global rebound, an array written in place. Julia asks for ``@everywhere``; overdub ships the
definitions with every piece of work instead.

* **What travels.** The *snapshot* (:mod:`~overdub.travel.snapshots`): every method table of the user's code -- its generic
  functions', the overdubs it added to contexts (``od.CPU``'s and ``od.ALL``'s too), the methods ``od.method``
  added to plain callables -- each method's def by value (:mod:`overdub.byvalue`), each table pickled on its
  own, as bytes with a digest, rebuilt when this process's world or something a def reads changes. And the
  work's own code: each def of the user's code that reaches overdub or numba, by value, with what it reads
  (:mod:`~overdub.travel.defs`, :mod:`~overdub.travel.tasks`); structs (:mod:`~overdub.travel.structclasses`) and contexts (:mod:`~overdub.travel.identities`) of
  the user's code by value.
* **When.** The *token* -- (root, digest, others, bytes) -- goes with everything above that a pickle holds,
  once per pickle (pickle's memo), through each engine's pickler (:mod:`overdub.engines` installs the hooks):
  the token of the work's submission (:class:`~overdub.travel.tasks.Pinned`; a def shipped on keeps the token it came with). Its
  digest is numbered by the root, and a process never goes back to an older snapshot of its root.
* **Arrival.** The receiving process compares the digest with the last one it adopted (one string
  comparison: the per-task cost when nothing changed) and otherwise *adopts* it (:mod:`~overdub.travel.arrival`): in each
  table, the methods whose def differs from the one it has are defined again, those the sender has not are
  deleted -- through the normal definition path, so only their dependents recompile. Nothing raises while a
  task is unpickled (Dask hangs when it does): what cannot arrive makes every launch here an error naming it.
* **Identity.** A generic function, context or struct is found by module and qualified name where that
  names it outside ``__main__``; else by its origin -- the process that made it and its id there -- so all
  tasks share one object on a worker (:mod:`~overdub.travel.origins`). A process never adopts its own definitions back, but does adopt the
  tables a worker made (a generic function defined in a task and returned).
* **Kernels by value.** A def arriving by value is a new function object in each task; :mod:`~overdub.travel.interning`
  maps it to the first one with the same content, so a worker compiles a definition once.

This package is that concept, one module each part. Importing it imports only :mod:`~overdub.travel.origins`
(a forked child must know what its parent made, whenever it first pickles); the rest loads at the first use
of the three functions the launch path calls (:mod:`overdub.call`), of an engine's pickler
(:mod:`overdub.engines`) or of a generic function's or context's pickling (``overdub/__init__.py``), and
then installs the reducers of generic functions, contexts and struct classes.
"""

import importlib
from typing import TYPE_CHECKING

from . import origins as _origins  # noqa: F401  (its fork hook: a child knows its parent's objects)

if TYPE_CHECKING:
    from .arrival import check_arrived
    from .defs import note_kernel
    from .interning import interned

__all__ = ["check_arrived", "interned", "note_kernel"]  # what overdub.call reaches through the package

_NAMES = {"check_arrived": "arrival", "note_kernel": "defs", "interned": "interning"}

if not TYPE_CHECKING:  # a type checker reads the imports above

    def __getattr__(name: str) -> object:
        module = _NAMES.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        load()
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value


def load() -> None:
    """The whole package, its reducers of generic functions, contexts and struct classes installed."""
    from . import identities, structclasses  # noqa: F401  (each installs its reducers)
