"""CUDA graphs of overdub kernels (``od.graph`` on the CUDA target): the driver's side.

A capture is the driver's stream capture on a stream of its own (``cuStreamBeginCapture``, relaxed mode, so
that cupy may allocate meanwhile); overdub's launches on the capturing thread go to that stream, and so does
cupy's work, its current stream while capturing. The captured graph is instantiated once. Each kernel node is
found by the ``CUfunction`` it launches; a kernel recompiled after a redefinition gets its new function put in
its nodes of the executable graph in place (``cuGraphExecKernelNodeSetParams``: no new capture, no new
instantiation), and a launch's arguments can be replaced the same way.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from .driver import checked, driver, make_current

try:
    from ..._fastlaunch import graph_launch as _graph_launch
except ImportError:  # built without a C compiler: a replay checks its kernels in Python (Graph._refresh)
    _graph_launch = None  # type: ignore[assignment]

CU_STREAM_NON_BLOCKING = 1


class Capture:
    """One stream capture and the executable graph it became."""

    def __init__(self) -> None:
        make_current()
        drv = driver().driver
        err, self.stream = drv.cuStreamCreate(CU_STREAM_NON_BLOCKING)
        checked("cuStreamCreate", err)
        self.handle = int(self.stream)
        self.user_stream = StreamHandle(self.handle)  # as launch functions take a stream
        self.graph: Any = None
        self.exec: Any = None
        self.nodes: dict[int, list[Any]] = {}  # CUfunction -> the kernel nodes launching it
        self.exec_handle = 0  # the executable graph's handle, once ended
        self.launch_entry = 0  # cuGraphLaunch's address, which a replay calls from C, once ended
        self._cupy_stream: Any = None

    def begin(self) -> None:
        drv = driver().driver
        mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        checked("cuStreamBeginCapture", *drv.cuStreamBeginCapture(self.stream, mode))
        cupy = _cupy()
        if cupy is not None:  # cupy's work on the capturing thread goes to the capture too
            from_external = getattr(cupy.cuda.Stream, "from_external", None)  # cupy 14; ExternalStream before
            self._cupy_stream = (
                from_external(self.user_stream) if from_external else cupy.cuda.ExternalStream(self.handle)
            )
            self._cupy_stream.__enter__()

    def end(self, failed: bool) -> None:
        """End the capture; unless the block ``failed``, instantiate its graph and find its kernel nodes."""
        drv = driver().driver
        if self._cupy_stream is not None:
            self._cupy_stream.__exit__(None, None, None)
            self._cupy_stream = None
        err, graph = drv.cuStreamEndCapture(self.stream)
        if failed:
            if not int(err) and graph is not None and int(graph):
                drv.cuGraphDestroy(graph)
            return
        checked("cuStreamEndCapture (a launch on the capture stream failed, or work on another stream joined it)", err)
        self.graph = graph
        err, self.exec = drv.cuGraphInstantiate(graph, 0)
        checked("cuGraphInstantiate", err)
        self.exec_handle = int(self.exec)
        self.launch_entry = driver().graph_launch  # cuGraphLaunch, which a replay calls from C
        err, nodes, count = drv.cuGraphGetNodes(graph)
        checked("cuGraphGetNodes", err)
        if count:
            err, nodes, count = drv.cuGraphGetNodes(graph, count)
            checked("cuGraphGetNodes", err)
        kernel = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
        for node in nodes or ():
            err, kind = drv.cuGraphNodeGetType(node)
            if not int(err) and kind == kernel:
                err, params = drv.cuGraphKernelNodeGetParams(node)
                checked("cuGraphKernelNodeGetParams", err)
                self.nodes.setdefault(int(params.func), []).append(node)

    def function_of(self, launcher: Any) -> int:
        """The CUfunction of the kernel ``launcher`` (a CUDALauncher) launches, in the current context."""
        return int(launcher._function())

    def parameters(self, launcher: Any, arguments: tuple[Any, ...]) -> tuple[object, Any]:
        """The kernel's parameters of ``arguments``, as a node takes them (the launcher's marshalling)."""
        kept: tuple[object, Any] = launcher.parameters(arguments)
        return kept

    def launch(self, launch_functions: tuple[Any, ...], stream: object) -> bool:
        """Launch the executable graph on ``stream`` (None: the null stream) if every native launch function's
        kernel is still valid (True), else False."""
        handle = 0 if stream is None else int(driver().stream(stream))
        return _graph_launch(launch_functions, self.exec_handle, handle, driver().graph_launch)

    def launch_unchecked(self, stream: object) -> None:
        handle = driver().null_stream if stream is None else driver().stream(stream)
        checked("cuGraphLaunch", *driver().driver.cuGraphLaunch(self.exec, handle))

    def replace_function(self, old: int, new: int) -> None:
        """Every kernel node launching ``old`` launches ``new`` instead (a recompiled kernel: the same
        parameters), in the executable graph and in the graph."""
        nodes = self.nodes.pop(old, [])
        for node in nodes:
            self._set(node, func=new)
        self.nodes.setdefault(new, []).extend(nodes)

    def replace_arguments(self, function: int, occurrence: int, slots: ctypes.Array[ctypes.c_void_p]) -> None:
        """The ``occurrence``-th node launching ``function`` takes the parameters at ``slots`` (an array of
        pointers, one per parameter slot: the driver copies them)."""
        self._set(self.nodes[function][occurrence], kernelParams=ctypes.addressof(slots))

    def _set(self, node: Any, **fields: object) -> None:
        drv = driver().driver
        err, params = drv.cuGraphKernelNodeGetParams(node)
        checked("cuGraphKernelNodeGetParams", err)
        for name, value in fields.items():
            setattr(params, name, value)
        checked("cuGraphExecKernelNodeSetParams", *drv.cuGraphExecKernelNodeSetParams(self.exec, node, params))
        checked("cuGraphKernelNodeSetParams", *drv.cuGraphKernelNodeSetParams(node, params))

    def close(self) -> None:
        drv = driver().driver
        if self.exec is not None:
            drv.cuGraphExecDestroy(self.exec)
        if self.graph is not None:
            drv.cuGraphDestroy(self.graph)
        drv.cuStreamDestroy(self.stream)
        self.exec = self.graph = None


def _cupy() -> Any:
    """cupy, where the program imported it (its work then joins the capture)."""
    return sys.modules.get("cupy")


class StreamHandle:
    """A stream of the driver's, as launch functions and cupy take one (``__cuda_stream__``)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)
