"""Attention as one ONNX Runtime ``MultiHeadAttention`` node (com.microsoft).

The row encoder (anekit.models.bert.make_row_encoder) traces attention as ONNX Runtime
sees it op by op: per layer, three head splits (``Reshape`` + ``Transpose``), the scores'
``MatMul``, the key mask's ``Add``, ``Softmax``, the context's ``MatMul`` and the heads'
merge (``Transpose`` + ``Reshape``): 12 nodes, each a run of its own. ONNX Runtime's CPU
``MultiHeadAttention`` kernel computes the same in one node, with the same products
(MiniLM's vectors come out bit for bit the same on this machine). :func:`fuse_attention`
replaces each such subgraph whose key mask is the encoder's ``(1 - keep) * fill`` by that
node with ``keep`` as its key padding mask; anything else is left as it is.

Measured on MiniLM int8, two rows at a time on two cores: 3-4 % more rows/s, and a
search query's embedding, with the calibrated scales too, 2.0 -> 1.6 ms
(docs/benchmarks.md: issue 34, and issue 33's query time).
Contrib operator: https://github.com/microsoft/onnxruntime/blob/main/docs/ContribOperators.md#com.microsoft.MultiHeadAttention
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from anekit.onnxgraph.edit import GraphEdit

MICROSOFT = "com.microsoft"
_SPLIT_Q = [0, 2, 1, 3]  # (B, S, H, D) -> (B, H, S, D); V and the merge use it too
_SPLIT_K = [0, 2, 3, 1]  # (B, S, H, D) -> (B, H, D, S)


class _Graph:
    def __init__(self, model: Any) -> None:
        from onnx import numpy_helper

        self.nodes = list(model.graph.node)
        self.producer = {out: node for node in self.nodes for out in node.output}
        self.consumers: dict[str, list[Any]] = {}
        for node in self.nodes:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.constants = {
            item.name: np.asarray(numpy_helper.to_array(item)) for item in model.graph.initializer
        }

    def made_by(self, name: str, op_type: str) -> Any | None:
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def only_consumer(self, name: str, op_type: str) -> Any | None:
        found = self.consumers.get(name, [])
        return found[0] if len(found) == 1 and found[0].op_type == op_type else None

    def perm(self, node: Any) -> list[int]:
        from onnx import helper

        for attribute in node.attribute:
            if attribute.name == "perm":
                return list(helper.get_attribute_value(attribute))
        return []

    def constant(self, name: str) -> np.ndarray | None:
        return self.constants.get(name)


def _mask_fill(graph: _Graph, mask: str, keep: str) -> float | None:
    """``fill`` when ``mask`` is ``Reshape((1 - keep) * fill, (B, 1, 1, S))``, else None."""
    reshape = graph.made_by(mask, "Reshape")
    target = None if reshape is None else graph.constant(reshape.input[1])
    if reshape is None or target is None or target.shape != (4,) or list(target[1:3]) != [1, 1]:
        return None
    scale = graph.made_by(reshape.input[0], "Mul")
    if scale is None:
        return None
    flipped = graph.made_by(scale.input[0], "Sub")
    fill = graph.constant(scale.input[1])
    if flipped is None or fill is None or fill.size != 1:
        return None
    one = graph.constant(flipped.input[0])
    if one is None or one.size != 1 or float(one) != 1.0 or flipped.input[1] != keep:
        return None
    return float(fill)


def _heads(graph: _Graph, split: Any) -> tuple[int, int] | None:
    target = graph.constant(split.input[1])
    if target is None or target.shape != (4,) or min(target[2:]) < 1:
        return None
    return int(target[2]), int(target[3])


@dataclass
class _Attention:
    """One matched attention subgraph: its q, k, v inputs (B, S, H*D), output, heads,
    mask fill and the nodes it replaces."""

    inputs: list[str]
    output: str
    heads: int
    fill: float
    nodes: list[Any]


def _match(graph: _Graph, softmax: Any, keep: str) -> _Attention | None:
    """The attention subgraph around ``softmax`` (module doc), or None."""
    add = graph.made_by(softmax.input[0], "Add")
    scores = None if add is None else graph.made_by(add.input[0], "MatMul")
    context = graph.only_consumer(softmax.output[0], "MatMul")
    if add is None or scores is None or context is None:
        return None
    fill = _mask_fill(graph, add.input[1], keep)
    q_t = graph.made_by(scores.input[0], "Transpose")
    k_t = graph.made_by(scores.input[1], "Transpose")
    v_t = graph.made_by(context.input[1], "Transpose")
    merge_t = graph.only_consumer(context.output[0], "Transpose")
    merge = None if merge_t is None else graph.only_consumer(merge_t.output[0], "Reshape")
    if fill is None or q_t is None or k_t is None or v_t is None or merge_t is None:
        return None
    if merge is None or [graph.perm(node) for node in (q_t, k_t, v_t, merge_t)] != [
        _SPLIT_Q,
        _SPLIT_K,
        _SPLIT_Q,
        _SPLIT_Q,
    ]:
        return None
    splits = [graph.made_by(node.input[0], "Reshape") for node in (q_t, k_t, v_t)]
    found = [split for split in splits if split is not None]
    shapes = {_heads(graph, split) for split in found}
    if len(found) != 3 or len(shapes) != 1:
        return None
    (shape,) = shapes
    merged = graph.constant(merge.input[1])
    if shape is None or merged is None or merged.shape != (3,):
        return None
    heads, depth = shape
    if int(merged[2]) != heads * depth:
        return None
    inner = [add, scores, softmax, context, q_t, k_t, v_t, merge_t, *found]
    if any(len(graph.consumers.get(node.output[0], [])) != 1 for node in inner):
        return None  # an intermediate something else reads too
    return _Attention(
        [split.input[0] for split in found], merge.output[0], heads, fill, [*inner, merge]
    )


def fuse_attention(model: Any, keep: str = "keep") -> int:
    """Replace in ``model`` (an ``onnx.ModelProto``) each attention subgraph (module doc)
    whose mask comes from the graph input ``keep`` by ``MultiHeadAttention``; returns
    how many were replaced."""
    from onnx import TensorProto, helper

    graph = _Graph(model)
    if keep not in {item.name for item in model.graph.input}:
        return 0
    edit = GraphEdit(model)
    key_mask = edit.fresh(f"{keep}_int32")
    dropped: set[int] = set()
    fused: dict[int, Any] = {}
    for softmax in (node for node in graph.nodes if node.op_type == "Softmax"):
        found = _match(graph, softmax, keep)
        if found is None:
            continue
        dropped.update(id(node) for node in found.nodes)
        fused[id(found.nodes[-1])] = helper.make_node(
            "MultiHeadAttention",
            [*found.inputs, "", key_mask],
            [found.output],
            domain=MICROSOFT,
            num_heads=found.heads,
            scale=1.0,  # the encoder scales the queries itself
            mask_filter_value=found.fill,
        )
    if not fused:
        return 0
    if not any(item.domain == MICROSOFT for item in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MICROSOFT, 1))
    nodes = [helper.make_node("Cast", [keep], [key_mask], to=TensorProto.INT32)]
    for node in graph.nodes:
        if id(node) in fused:
            nodes.append(fused[id(node)])
        elif id(node) not in dropped:
            nodes.append(node)
    edit.replaced = set(graph.constants)  # the mask's and the head splits' shapes
    edit.finish(_live(nodes, {item.name for item in model.graph.output}))
    return len(fused)


def _live(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """``nodes`` without those whose outputs nothing reads (the additive mask's, once no
    attention adds it), in order."""
    while True:
        read = outputs | {name for node in nodes for name in node.input}
        kept = [node for node in nodes if any(name in read for name in node.output)]
        if len(kept) == len(nodes):
            return kept
        nodes = kept


__all__ = ["fuse_attention"]
