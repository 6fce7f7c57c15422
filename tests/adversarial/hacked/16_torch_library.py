# problem: relu
# expect: 16
# Registers a custom op through torch.library.
import torch
import torch.nn as nn

lib = torch.library.Library("hack", "DEF")
lib.define("fast_relu(Tensor x) -> Tensor")
lib.impl("fast_relu", lambda x: x.clamp_min(0), "CompositeExplicitAutograd")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ops.hack.fast_relu(x)
