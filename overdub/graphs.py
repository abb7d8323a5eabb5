"""``od.graph()``: a sequence of kernel launches captured once and replayed, never with stale code.

::

    with od.graph() as g:            # the launches in the block are captured, not run
        od.cuda(step, u, v, blocks=n // 256, threads=256)
        kernel[blocks, threads](v, u)
    g.launch()                       # the whole sequence, one driver call (a CUDA graph)

On the CUDA target the block's launches (``od.cuda``, ``kernel[b, t]``, cupy's work on the capturing thread)
are captured by the driver (:mod:`overdub.targets.cuda.graph`). The graph records the compiled kernel of
each launch: a replay first checks that every one is still valid, as a launch does. After a redefinition
that invalidates one, the replay recompiles it and puts its new code in the executable graph's nodes in place,
then launches: never stale code, and no new capture. ``g.update(i, *args)`` gives the ``i``-th launch new
argument values (same classes and types) the same way.

On the CPU target the same block records the launches and ``g.launch()`` runs them in order, each an
``od.cuda`` call (so recompiled as any launch is).

A graph belongs to the thread that captured it while capturing; one graph captures at a time in a process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, cast

from . import call as call_module
from .launch import capture_into, launch_configured
from .launchconfig import LaunchConfig
from .targets import GraphCapture, Launcher, Target, get_target

try:
    from . import _fastlaunch
except ImportError:  # built without a C compiler: no native launch functions to check in C
    _fastlaunch = None  # type: ignore[assignment]

__all__ = ["Graph", "graph"]


def graph(target: str | Target | None = None) -> Graph:
    """A graph of the launches made in its ``with`` block (on ``target``: by default, the launches' default),
    replayed by ``launch()``."""
    return Graph(get_target(target))


@dataclass(eq=False)
class Captured:
    """One launch of a graph: the call as made, and on the CUDA target what it launched."""

    kernel: Any  # as od.cuda took them
    args: tuple[object, ...]
    config: LaunchConfig
    target: Any
    context: Any
    state: object
    compiled: Any = None  # CUDA: the compiled kernel (overdub.compiler.Kernel) the node launches
    function: int = 0  # CUDA: its CUfunction, which finds its nodes
    kept: tuple[object, ...] = ()  # CUDA: parameters set by update(), alive while the graph may read them

    def call(self, args: tuple[object, ...] | None = None) -> call_module.KernelCall:
        return call_module.KernelCall.of(
            self.kernel, self.args if args is None else args, self.target, self.context, self.state
        )


def _check_same_types(index: int, captured: Any, called: call_module.KernelCall) -> None:
    """A graph's launch ``index`` updated with arguments of the types it was captured with (``captured``: its
    compile job), or a TypeError saying to capture a new graph."""
    if called.job != captured:
        raise TypeError(
            f"od.graph update of launch {index}: {called.job.call().split('(')[0]} was captured for "
            f"({', '.join(map(str, captured.argtypes))}), these arguments are "
            f"({', '.join(str(a.type) for a in called.arguments)}): capture a new graph"
        )


class Graph:
    """Launches captured once (``with od.graph() as g:``) and replayed (``g.launch()``)."""

    def __init__(self, target: Target):
        self.target = target
        self.launches: list[Captured] = []
        self.thread = 0  # the thread capturing into this graph, while it does
        self._capture: GraphCapture | None = None  # the target's capture (CUDA's); None: launches kept
        self._checked: tuple[Any, ...] = ()  # CUDA: a native launch function per compiled kernel
        self._fast: tuple[Any, ...] = ()  # _checked where it covers every kernel: graph_launch checks them
        self._replay: tuple[int, int, int] = (0, 0, 0)  # CUDA: graph_launch's executable graph, null stream, entry
        self._closed = False
        self._failed = False  # the capture's block raised: nothing to replay (the CPU target's record)
        self._captured = False  # a graph captures once

    @property
    def _captures(self) -> GraphCapture:
        """The target's capture, where the graph has one (the paths of a graph of kept launches return before)."""
        assert self._capture is not None
        return self._capture

    # -- capture ------------------------------------------------------------------------------------------
    def __enter__(self) -> Graph:
        if self.thread or self._captured:
            raise RuntimeError("od.graph: this graph was captured already; make a new one with od.graph()")
        self.thread = threading.get_ident()
        try:
            capture_into(self)
        except RuntimeError:
            self.thread = 0
            raise
        self._captured = True
        try:
            self._capture = self.target.graph_capture()
            if self._capture is not None:
                self._capture.begin()
        except BaseException:
            self.thread = 0
            capture_into(None)
            raise
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        try:
            self._failed = kind is not None
            if self._capture is not None:
                self._capture.end(failed=kind is not None)
                if kind is None:
                    self._index_nodes()
                    self._replay = (self._capture.exec_handle, 0, self._capture.launch_entry)
        finally:
            self.thread = 0
            capture_into(None)

    def record(
        self,
        kernel: object,
        args: tuple[object, ...],
        config: LaunchConfig,
        target: str | Target | None,
        context: Any,
        state: object,
    ) -> None:
        """``od.cuda``'s call while this graph captures (its configuration checked already): checked as a
        launch is, then captured (CUDA) or kept (CPU)."""
        where = f"od.graph: the launch of {getattr(kernel, '__qualname__', kernel)!r}"
        if config.stream is not None or config.device is not None or config.debug:
            raise ValueError(
                f"{where} passes stream=, device= or debug=: a graph's launches run on its replay's stream and "
                f"device, unchecked (launch checked kernels outside the graph)"
            )
        if get_target(target).name != self.target.name:
            raise ValueError(f"{where} is on another target than the graph's ({self.target.label})")
        call_module.check_call(kernel, args)
        captured = Captured(kernel, tuple(args), config, target, context, state)
        launch = None
        if self._capture is not None:
            self.target.check_launchable(None)
            on_capture = replace(config, stream=self._capture.user_stream)
            _, compiled, launch = call_module.launch_compiled(
                kernel, args, on_capture, target, context, state, add=False
            )
            captured.compiled, captured.function = (
                compiled,
                self._capture.function_of(cast(Launcher, compiled.launcher)),
            )
        self.launches.append(captured)
        if launch is not None:
            self._keep_checked(launch)

    def _keep_checked(self, launch: object) -> None:
        native = _fastlaunch is not None and type(launch) is _fastlaunch.Launcher
        if native and all(other.kernel is not cast(Any, launch).kernel for other in self._checked):
            self._checked += (launch,)
        every = len(self._checked) == len({id(captured.compiled) for captured in self.launches})
        self._fast = self._checked if every else ()

    def _index_nodes(self) -> None:
        """Each launch's node: the n-th node of its function is the function's n-th launch (capture order)."""
        seen: dict[int, int] = {}
        for captured in self.launches:
            nodes = self._captures.nodes.get(captured.function, [])
            seen[captured.function] = seen.get(captured.function, 0) + 1
            if len(nodes) < seen[captured.function]:
                raise RuntimeError(f"od.graph: the captured graph lacks the launch of {captured.compiled.describe()}")

    # -- replay -------------------------------------------------------------------------------------------
    def launch(self, stream: object = None) -> None:
        """Run the captured launches, in order, on ``stream`` (default: the null stream). A kernel invalidated
        since the capture (or the last replay) is recompiled and replaced in the graph first."""
        if self.thread:
            raise RuntimeError("od.graph: launch() inside its own with block; launch after it")
        if self._fast:  # every kernel still valid: the graph in one call, checked and launched in C
            if stream is None and _fastlaunch.graph_launch(self._fast, *self._replay):
                return
            if stream is not None and self._captures.launch(self._fast, stream):
                return
        if self._capture is None:
            self._check_open()
            for captured in self.launches:
                self._run(captured)
            return
        self._check_open()
        self._refresh()
        self._captures.launch_unchecked(stream)

    def _run(self, captured: Captured) -> None:
        launch_configured(
            captured.kernel, captured.args, captured.config, captured.target, captured.context, captured.state
        )

    def _refresh(self) -> None:
        """Recompile each captured kernel no longer valid and put the new code in its nodes."""
        done: dict[int, tuple[Any, int]] = {}
        for captured in self.launches:
            old = captured.compiled
            if id(old) in done:
                captured.compiled, captured.function = done[id(old)]
                continue
            if old.usable():
                continue
            called = captured.call()
            compiled = called.compiled()
            if compiled.job.argtypes != old.job.argtypes:
                raise RuntimeError(
                    f"od.graph: {old.describe()} now compiles for other argument types "
                    f"({', '.join(map(str, compiled.job.argtypes))}): capture the graph again"
                )
            function = self._captures.function_of(cast(Launcher, compiled.launcher))
            self._captures.replace_function(captured.function, function)
            launch = called.launch_function(compiled)
            self._checked = tuple(c for c in self._checked if c.kernel is not old)
            done[id(old)] = (compiled, function)
            captured.compiled, captured.function = compiled, function
            self._keep_checked(launch)

    def update(self, index: int, *args: object) -> None:
        """The ``index``-th captured launch takes ``args`` from the next replay on (of the classes and types it
        was captured with; no new capture)."""
        captured = self.launches[index]
        self._check_open()
        if self._capture is None:  # the CPU target's record: the same checks, then the launch's arguments
            call_module.check_call(captured.kernel, args)
            _check_same_types(index, captured.call().job, captured.call(tuple(args)))
            captured.args = tuple(args)
            return
        self._refresh()
        called = captured.call(tuple(args))
        _check_same_types(index, captured.compiled.job, called)
        kept = self._captures.parameters(cast(Launcher, captured.compiled.launcher), called.arguments)
        occurrence = sum(1 for c in self.launches[:index] if c.function == captured.function)
        self._captures.replace_arguments(captured.function, occurrence, kept[1])
        captured.args, captured.kept = tuple(args), kept

    def _check_open(self) -> None:
        if self._closed or self._failed or (self._capture is not None and self._captures.exec is None):
            raise RuntimeError("od.graph: this graph was closed (or its capture failed)")

    def close(self) -> None:
        """Free the graph's driver objects (also done when it is collected); it replays no more."""
        if not self._closed:
            self._closed, self._fast = True, ()
            if self._capture is not None:
                self._capture.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the driver may be gone
            pass

    def __repr__(self) -> str:
        return f"<od.graph of {len(self.launches)} launches on {self.target.label}>"
