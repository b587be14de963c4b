"""Tensors and a metric for the PyTorch operator tests (tests/torch): imported by them, never by mage_tune."""

from __future__ import annotations


def rel(a, b) -> float:
    """Relative L2 distance of a from b, in float64."""
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def ln_inputs(torch, m: int, d: int, seed: int = 0):
    """x (m × d, mean 3), weight and bias of d on the GPU, from `seed`."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = 3.0 + torch.randn(m, d, device="cuda", generator=g)
    w = 1.0 + 0.5 * torch.randn(d, device="cuda", generator=g)
    b = torch.randn(d, device="cuda", generator=g)
    return x, w, b


def residual_block(torch, d: int, norm):
    """A pre-norm residual block: h = x + f(x); out = h + g(norm(h)); norm(out) (a sum used again, then one not)."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.f, self.g, self.n1, self.n2 = torch.nn.Linear(d, d), torch.nn.Linear(d, d), norm(d), norm(d)

        def forward(self, x):
            h = x + self.f(x)
            return self.n2(h + self.g(self.n1(h)))

    return Block()
