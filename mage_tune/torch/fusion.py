"""A compiler pass that fuses into mage_tune's layer norm what PyTorch's compiler fuses into its own.

torch.compile's Inductor fuses `embedding → layer_norm` and `add → layer_norm` into one kernel each, which reads the
looked-up rows (or the two addends) and writes only the normalized rows (and the sum, where it is used on). With
`mage_tune.torch.LayerNorm` the layer norm is an opaque operator, so the rows it reads would be written out and read
again first (2·tokens·d floats: ~10 µs at 8192 × 768 on an H200, ~56 µs at 8192 × 4096). This pass, run by Inductor
on each graph after autograd (its post-grad custom pass), replaces a `mage_tune::layer_norm` of

- an embedding lookup used by nothing else (aten.embedding, or its index_select / aten.index forms) by
  `mage_tune::embedding_layer_norm` (the `embedding-layernorm` family);
- a sum of two FP32 tensors of one shape (aten.add, no alpha) by `mage_tune::add_layer_norm` where the sum feeds the
  norm alone, else by `mage_tune::add_layer_norm_sum`, which writes the sum as well for its other users (the
  `add-layernorm` and `add-layernorm-sum` families); a tensor plus one row of its last dimension, feeding the norm
  alone, by `mage_tune::add_layer_norm` too (`add-vector-layernorm`);
- a Linear's output (aten.addmm: bias, then the product; or its rows through views or slices) feeding the norm alone
  by the product alone (aten.mm) and `mage_tune::add_layer_norm` of it and the bias: what Inductor does for its own
  layer norm (cuBLAS's matmul with a bias epilogue cost 4 % more than without it at 8192 × 4096 × 4096 FP32 in one
  H200 run).
- a sum x + (product + row) whose addend is a Linear's output with its bias added apart (Inductor's
  unfuse_bias_add_to_pointwise does that on a GPU where addmm's user is pointwise, as a residual add is) by
  `mage_tune::add_row_layer_norm`, or `mage_tune::add_row_layer_norm_sum` where the sum is used again (a pre-norm
  block's h = x + Linear(x)): the families `add-row-layernorm(-sum)`. It runs before the plain sum's rewrite, which
  would fuse the outer add alone and leave the bias add a kernel of its own. Where Inductor pads a matmul's rows (its
  shape padding, chosen by timing both, so not the same from run to run) the bias add is on the padded rows and a
  slice takes them off before the residual: the pass reads through that slice as through a view.

A lookup whose rows are used elsewhere too (a training graph keeps them for the backward) is left as it is. The pass
is installed when mage_tune.torch is imported, after any post-grad pass already set (which still runs);
`install(False)` takes it out again. It has a uuid, so Inductor's graph cache keys on it.
"""

from __future__ import annotations

import operator

from mage_tune import gpu
from mage_tune.torch import ops  # noqa: F401  (registers the operators the pass puts in)

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


def _norms(graph: fx.Graph) -> list:
    """The graph's mage_tune::layer_norm calls, listed before any is rewritten."""
    norm = torch.ops.mage_tune.layer_norm.default
    return [n for n in graph.nodes if n.op == "call_function" and n.target is norm and n.args]


def fuse_embedding_layer_norm(graph: fx.Graph) -> int:
    """Rewrite each lookup → mage_tune::layer_norm pair in `graph` (module docstring); how many were fused."""
    fused_op = torch.ops.mage_tune.embedding_layer_norm.default
    fused = 0
    for node in _norms(graph):
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
        _carry_value(node, new)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        graph.erase_node(rows)
        fused += 1
    return fused


def _sum_of(node) -> tuple | None:
    """(x, res) where `node` adds two FP32 tensors of its own shape, or one and a row of its last dimension (then
    res, the row, comes second); no alpha. None otherwise."""
    if not isinstance(node, fx.Node) or node.op != "call_function" or node.target is not torch.ops.aten.add.Tensor:
        return None
    if node.kwargs or len(node.args) != 2 or not all(isinstance(a, fx.Node) for a in node.args):
        return None
    value = node.meta.get("val")
    if value is None or value.dtype != torch.float32 or value.dim() == 0:
        return None
    values = [a.meta.get("val") for a in node.args]
    if any(v is None or v.dtype != torch.float32 for v in values):
        return None
    shapes = [tuple(v.shape) for v in values]
    full, row = tuple(value.shape), (value.shape[-1],)
    if shapes == [full, full]:
        return node.args[0], node.args[1]
    if full != row and sorted(shapes, key=len) == [row, full]:
        return (node.args[0], node.args[1]) if shapes[0] == full else (node.args[1], node.args[0])
    return None


def _is_row(node) -> bool:
    value = node.meta.get("val")
    return value is not None and value.dim() == 1


def fuse_add_layer_norm(graph: fx.Graph) -> int:
    """Rewrite each add → mage_tune::layer_norm pair in `graph`: by mage_tune::add_layer_norm where the sum feeds the
    norm alone, by mage_tune::add_layer_norm_sum (the norm and the sum) where the graph uses the sum again; how many."""
    mage = torch.ops.mage_tune
    fused = 0
    for node in _norms(graph):
        total = node.args[0]
        found = _sum_of(total)
        if found is None:
            continue
        used_again = any(u is not node for u in total.users)
        if used_again and _is_row(found[1]):
            continue  # a sum with one row written out too: no kernel of that form
        if used_again and not _defined_before(graph, node.args[1:], total):
            continue
        _fuse_norm_of_sum(graph, node, total, found, mage.add_layer_norm.default, mage.add_layer_norm_sum.default)
        fused += 1
    return fused


def _biased_product(node) -> tuple | None:
    """(add, top or None, product, row) where `node`, an addend of a norm's sum, is a Linear's output whose bias
    Inductor moved out of the matmul into a pointwise add (its unfuse_bias_add_to_pointwise, on a GPU): aten.add of an
    FP32 tensor and one row of its last dimension (either order, no alpha), or that sum through nodes that keep its
    rows (`_over_rows`; `top` the last of them); each used by nothing else. None otherwise."""
    node, chain = _over_rows(node)
    found = _sum_of(node)
    if found is None or len(node.users) != 1 or not _is_row(found[1]) or node.meta["val"].dim() < 2:
        return None
    return node, (chain[0] if chain else None), found[0], found[1]


def _residual_and_biased_product(addends: tuple) -> tuple | None:
    """(the other addend, `_biased_product` of one) for a sum's two addends, whichever is the Linear's; or None."""
    for x, addend in (addends, addends[::-1]):
        biased = _biased_product(addend)
        if biased is not None:
            return x, biased
    return None


def fuse_add_row_layer_norm(graph: fx.Graph) -> int:
    """Rewrite each mage_tune::layer_norm of x + (product + row), the addend a Linear's output with its bias added
    apart (`_biased_product`; either addend, either order), by mage_tune::add_row_layer_norm, or
    mage_tune::add_row_layer_norm_sum where the graph uses the outer sum again: neither sum is written out. How many."""
    mage = torch.ops.mage_tune
    fused = 0
    for node in _norms(graph):
        total = node.args[0]
        found = _sum_of(total)
        if found is None or found[0] is found[1] or _is_row(found[1]):
            continue
        split = _residual_and_biased_product(found)
        if split is None:
            continue
        x, (inner, top, product, row) = split
        if any(u is not node for u in total.users) and not _defined_before(graph, node.args[1:], total):
            continue
        if top is not None:  # the nodes over the rows take the product's as they took the sum's (the same shape)
            next(iter(inner.users)).replace_input_with(inner, product)
        args = (x, top or product, row)
        _fuse_norm_of_sum(
            graph, node, total, args, mage.add_row_layer_norm.default, mage.add_row_layer_norm_sum.default
        )
        graph.erase_node(inner)  # once the outer sum, its user where no node is between, is gone
        fused += 1
    return fused


def _defined_before(graph: fx.Graph, args, total) -> bool:
    """Whether `args`' nodes come before `total` in `graph`: a fused operator that writes the sum goes where the sum
    was (its other users may come before the norm), so the norm's other inputs (parameters, as a rule) must be there."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    return not any(isinstance(a, fx.Node) and order[a] > order[total] for a in args)


def _fuse_norm_of_sum(graph: fx.Graph, node, total, addends: tuple, op, sum_op) -> None:
    """Replace the norm `node` of the sum `total` by `op(*addends, weight, bias, eps)` where the sum feeds the norm
    alone, else by `sum_op`'s (norm, sum) put where the sum was, its sum taking the sum's other users."""
    rest = (*addends, *node.args[1:])
    if all(u is node for u in total.users):
        with graph.inserting_before(node):
            new = graph.call_function(op, rest, dict(node.kwargs))
        _carry_value(node, new)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        graph.erase_node(total)
        return
    with graph.inserting_after(total):
        new = graph.call_function(sum_op, rest, dict(node.kwargs))
    with graph.inserting_after(new):
        y = graph.call_function(operator.getitem, (new, 0))
        h = graph.call_function(operator.getitem, (new, 1))
    new.meta["val"] = (node.meta["val"], total.meta["val"])
    _carry_value(node, y)
    _carry_value(total, h)
    node.replace_all_uses_with(y)
    graph.erase_node(node)
    total.replace_all_uses_with(h)
    graph.erase_node(total)


_VIEWS = ("view", "reshape", "_unsafe_view")


def _keeps_rows(node) -> bool:
    """Whether `node` takes rows of its input whole, each of its rows one row of the input: a view or reshape that
    keeps the last size, or a slice along another dimension (Inductor's padding of a matmul slices its padded rows
    off after the bias add)."""
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], fx.Node):
        return False
    value, source = node.meta.get("val"), node.args[0].meta.get("val")
    if value is None or source is None or value.dim() == 0 or source.dim() == 0:
        return False
    aten = torch.ops.aten
    if node.target in [getattr(aten, name).default for name in _VIEWS]:
        return value.shape[-1] == source.shape[-1]
    if node.target is aten.slice.Tensor and not node.kwargs:
        dim = node.args[1] if len(node.args) > 1 else 0
        return isinstance(dim, int) and dim % source.dim() != source.dim() - 1 and value.shape[-1] == source.shape[-1]
    return False


def _over_rows(node) -> tuple:
    """(base, chain): `node` read down through nodes that keep rows (`_keeps_rows`), each used by nothing but the
    one above it; `chain` those nodes from `node` down, `base` what the last of them reads (`node` where none)."""
    chain = []
    while isinstance(node, fx.Node) and _keeps_rows(node) and len(node.users) == 1:
        chain.append(node)
        node = node.args[0]
    return node, chain


def _linear_output(node) -> tuple | None:
    """(addmm, top or None) where `node`, a norm's input, is a Linear's output (aten.addmm with an FP32 bias of its
    columns, beta and alpha 1) or that output through nodes that keep its rows (`_over_rows`; `top` the last of
    them), each used by nothing else; None otherwise."""
    aten = torch.ops.aten
    node, chain = _over_rows(node)
    if not isinstance(node, fx.Node) or node.op != "call_function" or node.target is not aten.addmm.default:
        return None
    if node.kwargs or len(node.args) != 3 or len(node.users) != 1:
        return None
    bias, value = node.args[0], node.meta.get("val")
    row = bias.meta.get("val") if isinstance(bias, fx.Node) else None
    if value is None or row is None or value.dtype != torch.float32 or row.dtype != torch.float32:
        return None
    if tuple(row.shape) != (value.shape[-1],):
        return None
    return node, (chain[0] if chain else None)


def fuse_linear_layer_norm(graph: fx.Graph) -> int:
    """Rewrite each Linear → mage_tune::layer_norm pair in `graph` (module docstring): the product by aten.mm, its
    bias added in the norm's kernel by mage_tune::add_layer_norm; how many."""
    aten = torch.ops.aten
    fused = 0
    for node in _norms(graph):
        found = _linear_output(node.args[0])
        if found is None:
            continue
        addmm, top = found
        bias, a, b = addmm.args
        with graph.inserting_before(addmm):
            product = graph.call_function(aten.mm.default, (a, b))
        _carry_value(addmm, product)
        addmm.replace_all_uses_with(product)
        graph.erase_node(addmm)
        with graph.inserting_before(node):
            new = graph.call_function(
                torch.ops.mage_tune.add_layer_norm.default, (top or product, bias, *node.args[1:]), dict(node.kwargs)
            )
        _carry_value(node, new)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        fused += 1
    return fused


def _carry_value(old, new) -> None:
    """`old`'s output value (its fake tensor) onto `new`; not its other meta (eager_input_vals holds the old node's
    inputs, which Inductor would match against the new operator's schema)."""
    new.meta.update({k: old.meta[k] for k in ("val", "stack_trace", "nn_module_stack") if k in old.meta})


class FusionPass(CustomGraphPass):
    """mage_tune's fusion, then the post-grad pass that was set before it (if any)."""

    def __init__(self, after=None):
        self.after = after

    def __call__(self, graph: fx.Graph) -> None:
        fuse_embedding_layer_norm(graph)
        fuse_linear_layer_norm(graph)
        fuse_add_row_layer_norm(graph)  # before fuse_add_layer_norm, which would take the outer sum alone
        fuse_add_layer_norm(graph)
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
