"""A tile kernel as a PyTorch custom op: eager, under torch.compile(fullgraph=True), opcheck."""

import torch

import tiledsl as td

from examples.matmul import matmul  # run from the repository root

mm = td.torch_op(matmul, name="mylib::matmul")  # schema: (Tensor a, Tensor b) -> Tensor


@torch.compile(fullgraph=True)
def mlp(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(mm(x, w)) + 1


x, w = torch.randn(300, 200), torch.randn(200, 100)
torch.testing.assert_close(mlp(x, w), torch.relu(x @ w) + 1, rtol=1e-4, atol=1e-4)
torch.library.opcheck(mm, (x, w))  # schema, fake tensors, autograd registration, AOT dispatch

# Dynamic shapes: the fake kernel returns symbolic sizes, so every batch size shares one graph.
scores = torch.compile(lambda x: mm(x, w).softmax(-1), fullgraph=True, dynamic=True)
for rows in (37, 150, 1001):
    x = torch.randn(rows, 200)
    torch.testing.assert_close(scores(x), (x @ w).softmax(-1), rtol=1e-4, atol=1e-4)
print("mylib::matmul: eager, torch.compile (static and dynamic shapes) and opcheck pass")
