"""Small PyTorch networks as people write them, exported with both of torch.onnx.export's exporters (the default
dynamo one: ``name.onnx`` + ``name.onnx.data``; the TorchScript one, ``dynamo=False``: ``name_ts.onnx``), for the
ONNX importer's tests (tests/importers/test_onnx_pytorch.py). The weights are random (seeded) and BatchNorm's
statistics set, so the files are a few KB each; the tests run them against onnxruntime, never import torch.

    pip install /path/to/torch-2.13.0+cpu-...whl onnxscript   # a CPU build of torch; onnxscript for dynamo
    python scripts/export_pytorch_nets.py                      # writes tests/data/pytorch/
"""

from __future__ import annotations

import argparse
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def networks():
    """name -> (module, input shape)."""
    import torch
    from torch import nn

    def block(cin, cout, groups=1, stride=1):
        return [nn.Conv2d(cin, cout, 3, stride, 1, groups=groups, bias=False), nn.BatchNorm2d(cout), nn.ReLU6()]

    def conv1d_with(activation):
        return nn.Sequential(nn.Conv1d(3, 6, 3, padding=1), activation, nn.Conv1d(6, 6, 3, padding=1),
                             nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(6, 4))

    torch.manual_seed(0)
    nets = {
        # depthwise-separable (MobileNet-style): BatchNorm, ReLU6, dropout before the classifier
        "mobilenet_style": (nn.Sequential(*block(3, 8, stride=2), *block(8, 8, groups=8),
                                          nn.Conv2d(8, 12, 1, bias=False), nn.BatchNorm2d(12), nn.ReLU6(),
                                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(12, 4)),
                            (1, 3, 12, 12)),
        "grouped_conv1d": (nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.ReLU(),
                                         nn.Conv1d(8, 8, 3, padding=1, groups=4), nn.ReLU(),
                                         nn.Conv1d(8, 6, 1, groups=2), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                                         nn.Linear(6, 3)), (1, 4, 16)),
        "grouped_conv2d": (nn.Sequential(nn.Conv2d(4, 6, 3, padding=1, groups=2), nn.ReLU(),
                                         nn.Conv2d(6, 6, 3, stride=2, groups=3), nn.AdaptiveAvgPool2d(1),
                                         nn.Flatten(), nn.Linear(6, 3)), (1, 4, 8, 8)),
        "leaky_relu": (conv1d_with(nn.LeakyReLU(0.1)), (1, 3, 16)),
        "sigmoid": (conv1d_with(nn.Sigmoid()), (1, 3, 16)),
        "tanh": (conv1d_with(nn.Tanh()), (1, 3, 16)),
        "hardswish": (conv1d_with(nn.Hardswish()), (1, 3, 16)),
        "hardsigmoid": (conv1d_with(nn.Hardsigmoid()), (1, 3, 16)),
        "elu": (conv1d_with(nn.ELU()), (1, 3, 16)),
        "silu": (conv1d_with(nn.SiLU()), (1, 3, 16)),
        "prelu": (conv1d_with(nn.PReLU(6, 0.2)), (1, 3, 16)),
        "gelu": (conv1d_with(nn.GELU()), (1, 3, 16)),
        "gelu_tanh": (conv1d_with(nn.GELU(approximate="tanh")), (1, 3, 16)),
    }
    for module, _ in nets.values():
        for layer in module.modules():
            if isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
                layer.running_mean.uniform_(-0.5, 0.5)
                layer.running_var.uniform_(0.5, 2.0)
                layer.weight.data.uniform_(0.5, 1.5)
                layer.bias.data.uniform_(-0.5, 0.5)
            if isinstance(layer, nn.PReLU):
                layer.weight.data.uniform_(-0.2, 0.4)
        module.eval()
    return nets


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "data" / "pytorch")
    parser.add_argument("names", nargs="*", help="the networks to export (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (module, shape) in networks().items():
        if args.names and name not in args.names:
            continue
        x = (torch.zeros(*shape),)
        torch.onnx.export(module, x, str(args.out / f"{name}.onnx"))  # the defaults: dynamo, external data
        torch.onnx.export(module, x, str(args.out / f"{name}_ts.onnx"), dynamo=False)  # TorchScript, opset 17
        print(name)


if __name__ == "__main__":
    main()
