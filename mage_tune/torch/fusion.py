"""A compiler pass that fuses an embedding lookup into mage_tune's layer norm, as PyTorch fuses it into its own.

torch.compile's Inductor fuses `embedding → layer_norm` into one kernel that reads the looked-up rows from the table
and writes only the normalized ones; with `mage_tune.torch.LayerNorm` the layer norm is an opaque operator, so the
looked-up rows would be written out and read again (2·tokens·d floats: ~10 µs at 8192 × 768 on an H200, ~56 µs at
8192 × 4096). This pass, run by Inductor on each graph after autograd (its post-grad custom pass), replaces a
`mage_tune::layer_norm` whose input is an embedding lookup used by nothing else (an index_select of rows, or an
aten.index of rows, alike) by `mage_tune::embedding_layer_norm`, which the `embedding-layernorm` family runs.

A lookup whose rows are used elsewhere too (a training graph keeps them for the backward) is left as it is. The pass
is installed when mage_tune.torch is imported, after any post-grad pass already set (which still runs);
`install(False)` takes it out again. It has a uuid, so Inductor's graph cache keys on it.
"""

from __future__ import annotations

from mage_tune import gpu

torch = gpu.torch()
fx = torch.fx
inductor_config, custom_graph_pass = gpu.inductor()
CustomGraphPass = custom_graph_pass.CustomGraphPass


def _lookup(node) -> tuple | None:
    """(table, index) where `node` looks up rows of a table by an index tensor; None otherwise."""
    if not isinstance(node, fx.Node) or node.op != "call_function":
        return None
    aten = torch.ops.aten
    args = node.args
    if node.target is aten.embedding.default and not node.kwargs:
        return args[0], args[1]  # padding_idx and the rest change only the backward
    if node.target is aten.index_select.default and len(args) == 3 and args[1] == 0:
        return args[0], args[2]
    if node.target is aten.index.Tensor and len(args) == 2 and len(args[1]) == 1 and args[1][0] is not None:
        return args[0], args[1][0]
    return None


def fuse_embedding_layer_norm(graph: fx.Graph) -> int:
    """Rewrite each lookup → mage_tune::layer_norm pair in `graph` (module docstring); how many were fused."""
    norm = torch.ops.mage_tune.layer_norm.default
    fused_op = torch.ops.mage_tune.embedding_layer_norm.default
    fused = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not norm or not node.args:
            continue
        rows = node.args[0]
        found = _lookup(rows)
        if found is None or len(rows.users) != 1:
            continue
        table, index = found
        value = getattr(index, "meta", {}).get("val")
        if value is None or value.dtype != torch.int64:
            continue
        with graph.inserting_before(node):
            new = graph.call_function(fused_op, (table, index, *node.args[1:]), dict(node.kwargs))
        # the output's value (its fake tensor); not the norm's other meta (eager_input_vals holds the norm's inputs,
        # which Inductor would match against the fused operator's schema)
        new.meta.update({k: node.meta[k] for k in ("val", "stack_trace", "nn_module_stack") if k in node.meta})
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        graph.erase_node(rows)
        fused += 1
    return fused


class FusionPass(CustomGraphPass):
    """mage_tune's fusion, then the post-grad pass that was set before it (if any)."""

    def __init__(self, after=None):
        self.after = after

    def __call__(self, graph: fx.Graph) -> None:
        fuse_embedding_layer_norm(graph)
        if self.after is not None:
            self.after(graph)

    def uuid(self):
        theirs = self.after.uuid() if isinstance(self.after, CustomGraphPass) else None
        return (custom_graph_pass.get_hash_for_files((__file__,)), theirs)


def install(on: bool = True) -> None:
    """Put the pass into Inductor's post-grad custom pass (keeping one set before), or take it out (`on` False)."""
    current = inductor_config.post_grad_custom_post_pass
    if isinstance(current, FusionPass):
        if on:
            return
        inductor_config.post_grad_custom_post_pass = current.after
    elif on:
        inductor_config.post_grad_custom_post_pass = FusionPass(current)
