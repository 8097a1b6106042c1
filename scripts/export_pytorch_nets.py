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
    """name -> (module, input shape, or the shapes of its inputs: the data, then initial states)."""
    import torch
    from torch import nn

    def block(cin, cout, groups=1, stride=1):
        return [nn.Conv2d(cin, cout, 3, stride, 1, groups=groups, bias=False), nn.BatchNorm2d(cout), nn.ReLU6()]

    def conv1d_with(activation):
        return nn.Sequential(nn.Conv1d(3, 6, 3, padding=1), activation, nn.Conv1d(6, 6, 3, padding=1),
                             nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(6, 4))

    class Elementwise(nn.Module):
        """Sub and Add of two branches, Mul by a per-channel constant and by a scalar, Div by a constant,
        maximum / minimum of two tensors, broadcast."""

        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv1d(3, 6, 3, padding=1), nn.Conv1d(3, 6, 3, padding=1)
            self.scale = nn.Parameter(torch.rand(6, 1) + 0.5)
            self.head = nn.Linear(6, 4)

        def forward(self, x):
            a, b = self.a(x), self.b(x)
            y = (a - b) * self.scale + torch.maximum(a, b) / 4.0 - torch.minimum(a, 0.5 * b)
            return self.head(y.mean(dim=2))

    class Shapes(nn.Module):
        """split, cat, F.pad, a strided slice, permute, unsqueeze / squeeze, chunk, cat on another axis."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(4, 8, 3, padding=1)
            self.head = nn.Linear(32, 3)

        def forward(self, x):
            a, b = torch.split(self.conv(x), [3, 5], dim=1)
            y = nn.functional.pad(torch.cat([b, a], dim=1), (2, 1))  # (1, 8, 19)
            y = y[:, :, 1:17:2].permute(0, 2, 1).unsqueeze(1)  # (1, 1, 8, 8)
            first, second = torch.chunk(y.squeeze(1), 2, dim=1)  # (1, 4, 8) each
            return self.head(torch.cat([first, second.relu()], dim=2).flatten(1)[:, :32])

    class Reductions(nn.Module):
        """mean, sum and max over channels and over time, keepdim or not."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(3, 6, 3, padding=1)
            self.head = nn.Linear(6 + 16 + 16, 4)

        def forward(self, x):
            y = self.conv(x)
            over_time = y.amax(dim=2) + y.sum(dim=-1) / 16
            over_channels = y.mean(dim=1, keepdim=True).squeeze(1)
            return self.head(torch.cat([over_time, over_channels, y.sum(dim=1)], dim=1))

    class Recurrent(nn.Module):
        """A recurrent layer and a Linear head on its last output (``last="output"``: y[:, -1] or y[-1]) or on the
        last layer's final hidden state (``last="hidden"``: h_n[-1]); given ``states``, the initial states are
        inputs and the final states outputs (a stream carries them between calls); ``conv``: a Conv1d before it."""

        def __init__(self, layer, classes, last="output", states=False, conv=None):
            super().__init__()
            self.layer, self.conv, self.last, self.states = layer, conv, last, states
            width = layer.hidden_size * (2 if layer.bidirectional else 1)
            self.head = nn.Linear(width, classes)

        def forward(self, x, *initial):
            if self.conv is not None:  # (batch, channels, time) -> (batch, time, channels)
                x = torch.relu(self.conv(x)).permute(0, 2, 1)
            if isinstance(self.layer, nn.LSTM):
                y, (h, c) = self.layer(x, tuple(initial) if initial else None)
                final = (h, c)
            else:
                y, h = self.layer(x, initial[0] if initial else None)
                final = (h,)
            if self.last == "hidden":
                features = h[-1]
            else:
                features = y[:, -1] if self.layer.batch_first else y[-1]
            scores = self.head(features)
            return (scores, *final) if self.states else scores

    class Interpolate(nn.Module):
        """F.interpolate: nearest by a scale factor, bilinear to a size (align_corners False and True)."""

        def __init__(self):
            super().__init__()
            self.conv, self.mix = nn.Conv2d(2, 4, 3, padding=1), nn.Conv2d(4, 4, 3)
            self.head = nn.Linear(4, 3)

        def forward(self, x):
            y = nn.functional.interpolate(torch.relu(self.conv(x)), scale_factor=2, mode="nearest")  # 12 x 12
            y = nn.functional.interpolate(self.mix(y), size=(15, 9), mode="bilinear", align_corners=False)
            y = nn.functional.interpolate(y, size=(7, 5), mode="bilinear", align_corners=True)
            return self.head(y.mean(dim=(2, 3)))

    torch.manual_seed(0)
    recurrent = {
        # Conv1d then a GRU over the convolution's time axis (batch_first), its last output
        "conv1d_gru": (Recurrent(nn.GRU(8, 12, batch_first=True), 4, conv=nn.Conv1d(3, 8, 3, padding=1)),
                       (1, 3, 16)),
        "lstm_classifier": (Recurrent(nn.LSTM(5, 10, batch_first=True), 3, last="hidden"), (1, 12, 5)),
        "bidirectional_gru": (Recurrent(nn.GRU(5, 8, batch_first=True, bidirectional=True), 3), (1, 10, 5)),
        # sequence first, two layers, the initial states given and the final ones returned
        "lstm_2layer": (Recurrent(nn.LSTM(4, 8, num_layers=2), 3, last="hidden", states=True),
                        ((10, 1, 4), (2, 1, 8), (2, 1, 8))),
        "rnn_tanh": (Recurrent(nn.RNN(5, 9, batch_first=True, nonlinearity="tanh"), 3, states=True),
                     ((1, 12, 5), (1, 1, 9))),
        # the chip models: keyword spotting (49 frames of 10 MFCCs), activity recognition (3-axis accelerometer)
        "gru_keyword": (Recurrent(nn.GRU(10, 32, batch_first=True), 12), (1, 49, 10)),
        "lstm_activity": (Recurrent(nn.LSTM(3, 20, batch_first=True), 6, last="hidden"), (1, 32, 3)),
    }
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
        "elementwise": (Elementwise(), (1, 3, 16)),
        "shapes": (Shapes(), (1, 4, 16)),
        "reductions": (Reductions(), (1, 3, 16)),
        "pools2d": (nn.Sequential(nn.Conv2d(2, 4, 3), nn.MaxPool2d(3, 2, ceil_mode=True),
                                  nn.AvgPool2d(3, 1, padding=1), nn.AdaptiveAvgPool2d(2),
                                  nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(4, 3)), (1, 2, 14, 14)),
        "pools1d": (nn.Sequential(nn.Conv1d(2, 4, 3), nn.MaxPool1d(2, ceil_mode=True),
                                  nn.AvgPool1d(3, 2, padding=1, ceil_mode=True, count_include_pad=False),
                                  nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Linear(4, 3)), (1, 2, 17)),
        "conv_transpose1d": (nn.Sequential(nn.Conv1d(3, 6, 3, stride=2), nn.ReLU(),
                                           nn.ConvTranspose1d(6, 4, 4, stride=2, padding=1), nn.ReLU(),
                                           nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(4, 3)), (1, 3, 16)),
        "conv_transpose2d": (nn.Sequential(nn.Conv2d(2, 4, 3, stride=2), nn.ReLU(),
                                           nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1),
                                           nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 3)), (1, 2, 9, 9)),
        "softmax": (nn.Sequential(nn.Conv1d(3, 6, 3), nn.ReLU(), nn.Flatten(), nn.Linear(84, 4), nn.Softmax(dim=1)),
                    (1, 3, 16)),
        "log_softmax": (nn.Sequential(nn.Conv1d(3, 6, 3), nn.ReLU(), nn.Flatten(), nn.Linear(84, 4),
                                      nn.LogSoftmax(dim=-1)), (1, 3, 16)),
        "interpolate": (Interpolate(), (1, 2, 6, 6)),
        "layer_norm": (nn.Sequential(nn.Flatten(), nn.Linear(48, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 4)),
                       (1, 3, 16)),
    }
    nets.update(recurrent)
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
        shapes = shape if isinstance(shape[0], tuple) else (shape,)
        x = tuple(torch.zeros(*s) for s in shapes)
        torch.onnx.export(module, x, str(args.out / f"{name}.onnx"))  # the defaults: dynamo, external data
        torch.onnx.export(module, x, str(args.out / f"{name}_ts.onnx"), dynamo=False)  # TorchScript, opset 17
        print(name)


if __name__ == "__main__":
    main()
