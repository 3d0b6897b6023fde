"""In-place edits of an ``onnx.ModelProto``'s graph: fresh names, new initializers, and
the node list replaced with unread initializers dropped."""

from __future__ import annotations

from typing import Any

import numpy as np


class GraphEdit:
    """Fresh tensor names and new initializers in ``model``'s graph; the initializers
    named in :attr:`replaced` are dropped at :meth:`finish` when no node reads them."""

    def __init__(self, model: Any) -> None:
        self.graph = model.graph
        self.initializers = {item.name: item for item in self.graph.initializer}
        self.taken = {name for node in self.graph.node for name in (*node.input, *node.output)}
        self.taken |= set(self.initializers) | {item.name for item in self.graph.input}
        self.taken |= {node.name for node in self.graph.node if node.name}
        self.replaced: set[str] = set()

    def fresh(self, base: str) -> str:
        """``base``, or ``base_N``: a name nothing in the graph has."""
        name, count = base, 1
        while name in self.taken:
            name, count = f"{base}_{count}", count + 1
        self.taken.add(name)
        return name

    def add(self, base: str, array: np.ndarray) -> str:
        """A new initializer holding ``array``; returns its name."""
        from onnx import numpy_helper

        name = self.fresh(base)
        self.graph.initializer.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def finish(self, nodes: list[Any]) -> None:
        """Install ``nodes`` and drop the replaced initializers no node reads any more."""
        del self.graph.node[:]
        self.graph.node.extend(nodes)
        used = {name for node in self.graph.node for name in node.input}
        used |= {item.name for item in self.graph.output}
        kept = [
            item
            for item in self.graph.initializer
            if item.name in used or item.name not in self.replaced
        ]
        del self.graph.initializer[:]
        self.graph.initializer.extend(kept)


__all__ = ["GraphEdit"]
