"""A target's root: the end of every chain of the target -- its fixed meaning of names, and no overdubs.

A root forwards names (``print`` -> ``cuprintln``) and replaces objects (numba-cuda's kernel idiom on the CPU
target) for every kernel of its target; it hides the target's own stand-ins from hooks. A launch passing
state ends its chain at the root's :class:`StateRoot` for the state's type, which shares the root's meaning
of names; a configured target's root shares its plain target's tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NoReturn
from typing import Any as Arbitrary

from . import world
from .context import Context, ContextShape

if TYPE_CHECKING:
    from numba.core import types as nt

    from .targets import Target

__all__ = ["TargetRoot", "StateRoot"]


class TargetRoot(Context):
    """The end of every chain of a target: no overdubs (so never popped), only the target's fixed meaning
    of names -- its forwards (``print`` -> ``cuprintln``) and replacements (the CUDA kernel idiom on the CPU).
    """

    overdubbable = False
    state: nt.Type | None = None  # the numba type of the state launches in chains ending here pass, if any

    def __init__(self, name: str, target: Target) -> None:
        super().__init__(name)
        self.target = target
        self._with_state: dict[nt.Type, StateRoot] = {}  # state type -> this root for launches passing it
        self._hidden: dict[int, object] = {}  # id(callee) -> callee

    def hide(self, *callees: object) -> None:
        """Keep calls of ``callees`` -- the target's stand-ins for what is no function on other targets (the
        CPU target's ``cuda.atomic.add``, ``cuda.local.array``) -- out of what hooks observe, so that a hook of
        ``od.Any`` observes the same calls on every target."""
        self._hidden.update((id(callee), callee) for callee in callees)

    def hides(self, callee: object) -> bool:
        return self._hidden.get(id(callee)) is callee

    def with_state(self, state_type: nt.Type) -> StateRoot:
        """This root for launches passing state of the numba type ``state_type``: what is compiled for them
        takes it as a hidden first parameter, so it is compiled apart (one compile per state type)."""
        root = self._with_state.get(state_type)
        if root is None:
            with world.lock:
                root = self._with_state.setdefault(state_type, StateRoot(self, state_type))
        return root

    def add_imported(
        self, forwards: Iterable[tuple[object, object]] = (), replacements: Iterable[tuple[object, object]] = ()
    ) -> None:
        """Add forwards -- ``(callee, to)`` pairs -- and replacements -- ``(obj, replacement)`` pairs -- of the
        objects of a module being imported, from its post-import hook (:func:`when_imported`), without
        reshaping the root. Until the module is imported no code can name its objects, so nothing compiled
        so far depends on what they mean here, and nothing recompiles: a reshape would recompile every kernel
        of the target. (The CPU target's meaning of numba-cuda's kernel idiom, added once a program imports
        numba-cuda: a program that never names it does not wait for its import.)"""
        for callee, to in forwards:
            self._forwards[self._key(callee)] = to
        for obj, replacement in replacements:
            self._replacements[id(obj)] = (obj, replacement)

    def configured_for(self, target: Target) -> TargetRoot:
        """The root of ``target``, a configuration of this root's target: the same meaning of names -- the
        very tables, so that what this root adds later (:meth:`add_imported`) every configuration means too."""
        root = TargetRoot(f"{self.name}[{target.options.describe()}]", target)
        root._forwards, root._replacements = self._forwards, self._replacements
        root._namespaces, root._hidden = self._namespaces, self._hidden
        return root

    def overdub(self, callee: Callable[..., Arbitrary]) -> NoReturn:
        raise TypeError(
            f"the root of the {self.target.label} target holds no overdubs: add them to od.{self.target.base.name}, "
            f"or to a context of your own"
        )


class StateRoot(TargetRoot):
    """A target's root for launches passing state of one numba type: the root's meaning of names, and the
    state's type."""

    def __init__(self, root: TargetRoot, state_type: nt.Type) -> None:
        Context.__init__(self, f"{root.name}[state {state_type}]")
        self.target, self.state, self.root = root.target, state_type, root

    @property
    def shape(self) -> ContextShape:
        return self.root.shape

    # set once by Context.__init__; the root's shape is the one that changes
    @shape.setter
    def shape(self, node: ContextShape) -> None:
        pass

    def forwarded(self, callee: object) -> object:
        return self.root.forwarded(callee)

    def replacement(self, obj: object) -> object:
        return self.root.replacement(obj)

    def hides(self, callee: object) -> bool:
        return self.root.hides(callee)

    def forward(self, callee: object, to: object) -> None:
        self.root.forward(callee, to)

    def replace(self, obj: object, replacement: object) -> None:
        self.root.replace(obj, replacement)
