"""The PyTorch zoo: small networks as people write them for small chips (LeNet, MLPs, CNNs, MobileNetV2/V3-style
inverted residuals, ResNet-8, DS-CNN, a GRU keyword model, an LSTM activity model, a dilated 1-D TCN, autoencoders,
a tiny U-Net, attention pooling, an Embedding model), each trained a few epochs on offline data and exported with
both of torch.onnx.export's exporters (the default dynamo one: ``name.onnx`` + ``name.onnx.data``; the TorchScript
one, ``dynamo=False``: ``name_ts.onnx``). benchmarks/pytorch_zoo.py compiles and measures them; the tests read the
committed files (tests/data/pytorch_zoo) and never import torch.

The data (numpy only, seeded, so the benchmark regenerates the same rows without torch):

    digits      scikit-learn's digits, 8x8 images in [0, 1] (1347 training rows, 450 test rows)
    sensor      SYNTHETIC 3-axis accelerometer windows, 32 samples, 6 activities (a sine per class, its own
                frequency, axis amplitudes and gravity offset; random phase, gain and noise)
    keyword     SYNTHETIC keyword-like sequences, 49 frames x 10 features, 8 classes (a smooth template per class,
                shifted in time, scaled, noisy)
    denoise     digits with noise in, the clean digit's ink mask out (per-pixel labels)
    tokens      SYNTHETIC token sequences, 12 tokens of a 24-word vocabulary, 4 classes (each class's key tokens
                among random filler)

    pip install /path/to/torch-2.13.0+cpu-...whl onnxscript   # a CPU build of torch; onnxscript for dynamo
    python scripts/pytorch_zoo.py [--out DIR] [names...]       # default DIR: tests/data/pytorch_zoo
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "pytorch_zoo"


@dataclass(frozen=True)
class Dataset:
    """Rows in the network's input shape (batch first); ``task``: "classify" (labels: the class), "pixels" (labels:
    one 0/1 per output element, the score's sign), "reconstruct" (labels: the wanted outputs)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    task: str = "classify"


def _split(X: np.ndarray, y: np.ndarray, test: int, seed: int, task: str = "classify") -> Dataset:
    order = np.random.default_rng(seed).permutation(len(X))
    X, y = X[order], y[order]
    return Dataset(X[:-test], y[:-test], X[-test:], y[-test:], task)


def digits(shape: tuple[int, ...] = (1, 8, 8)) -> Dataset:
    from sklearn.datasets import load_digits

    data = load_digits()
    X = (data.data / 16.0).reshape(-1, *shape).astype(np.float32)
    return _split(X, data.target.astype(np.int64), 450, 0)


def sensor(layout: str = "channels", n: int = 1500) -> Dataset:
    """SYNTHETIC accelerometer windows: (n, 3, 32) channels first, or (n, 32, 3) for a recurrent layer."""
    rng = np.random.default_rng(1)
    classes = 6
    frequency = 1.0 + 0.6 * np.arange(classes)  # cycles per window
    amplitude = rng.uniform(0.2, 1.0, size=(classes, 3))
    gravity = rng.uniform(-0.5, 0.5, size=(classes, 3))
    y = rng.integers(0, classes, n)
    t = np.arange(32) / 32.0
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1))
    gain = rng.uniform(0.8, 1.2, size=(n, 1, 1))
    wave = np.sin(2 * np.pi * frequency[y][:, None, None] * t[None, None, :] + phase)
    X = gain * amplitude[y][:, :, None] * wave + gravity[y][:, :, None] + rng.normal(0, 0.35, size=(n, 3, 32))
    if layout == "sequence":
        X = X.transpose(0, 2, 1)
    return _split(X.astype(np.float32), y.astype(np.int64), 400, 2)


def keyword(layout: str = "sequence", n: int = 1600) -> Dataset:
    """SYNTHETIC keyword-like sequences: (n, 49, 10), or (n, 1, 49, 10) as an image."""
    rng = np.random.default_rng(3)
    classes = 8
    raw = rng.normal(size=(classes, 49 + 8, 10))
    kernel = np.exp(-0.5 * (np.arange(-4, 5) / 2.0) ** 2)
    templates = np.stack([np.stack([np.convolve(c[:, f], kernel / kernel.sum(), "same") for f in range(10)], axis=1)
                          for c in raw]) * 2.5
    y = rng.integers(0, classes, n)
    shift = rng.integers(0, 9, n)
    X = np.stack([templates[c, s:s + 49] for c, s in zip(y, shift)])
    X = X * rng.uniform(0.7, 1.3, size=(n, 1, 1)) + rng.normal(0, 0.6, size=X.shape)
    if layout == "image":
        X = X[:, None]
    return _split(X.astype(np.float32), y.astype(np.int64), 400, 4)


def denoise() -> Dataset:
    from sklearn.datasets import load_digits

    clean = (load_digits().data / 16.0).reshape(-1, 1, 8, 8)
    noisy = clean + np.random.default_rng(5).normal(0, 0.35, size=clean.shape)
    return _split(noisy.astype(np.float32), (clean > 0.5).astype(np.int64), 450, 6, "pixels")


def reconstruct(shape: tuple[int, ...] = (64,)) -> Dataset:
    d = digits(shape)
    return Dataset(d.X_train, d.X_train, d.X_test, d.X_test, "reconstruct")


def tokens(n: int = 1500) -> Dataset:
    """SYNTHETIC token sequences (int64): tokens 0-11 are filler, 12 + 3c .. 14 + 3c class c's key tokens."""
    rng = np.random.default_rng(7)
    y = rng.integers(0, 4, n)
    X = rng.integers(0, 12, size=(n, 12))
    for row, c in zip(X, y):
        places = rng.choice(12, size=2, replace=False)
        row[places] = 12 + 3 * c + rng.integers(0, 3, 2)
    return _split(X.astype(np.int64), y.astype(np.int64), 400, 8)


DATASETS = {"digits": digits, "digits64": lambda: digits((64,)), "sensor": sensor,
            "sensor_seq": lambda: sensor("sequence"), "keyword": keyword, "keyword_image": lambda: keyword("image"),
            "denoise": denoise, "reconstruct64": reconstruct, "reconstruct_image": lambda: reconstruct((1, 8, 8)),
            "tokens": tokens}


def zoo() -> dict:
    """name -> (module, dataset name). Small enough for the chips' RAM where the family allows."""
    import torch
    from torch import nn

    F = nn.functional

    def conv_bn(cin, cout, kernel=3, stride=1, groups=1, activation=None):
        return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout),
                activation if activation is not None else nn.ReLU()]

    def mlp(*widths, activation=nn.ReLU):
        layers = []
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), activation()]
        return nn.Sequential(*layers[:-1])

    class Residual(nn.Module):
        def __init__(self, body, shortcut=None, after=None):
            super().__init__()
            self.body, self.shortcut, self.after = body, shortcut, after

        def forward(self, x):
            y = self.body(x) + (x if self.shortcut is None else self.shortcut(x))
            return y if self.after is None else self.after(y)

    class SqueezeExcite(nn.Module):
        def __init__(self, channels, reduced, gate):
            super().__init__()
            self.reduce, self.expand, self.gate = nn.Conv2d(channels, reduced, 1), nn.Conv2d(reduced, channels, 1), gate

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            return x * self.gate(self.expand(torch.relu(self.reduce(s))))

    def inverted_residual(cin, cout, stride, expand, activation=nn.ReLU6, se=False):
        hidden = cin * expand
        layers = conv_bn(cin, hidden, 1, activation=activation()) if expand != 1 else []
        layers += conv_bn(hidden, hidden, 3, stride, groups=hidden, activation=activation())
        if se:
            layers.append(SqueezeExcite(hidden, max(hidden // 4, 4), nn.Hardsigmoid()))
        layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        body = nn.Sequential(*layers)
        return Residual(body) if stride == 1 and cin == cout else body

    def basic_block(cin, cout, stride):
        body = nn.Sequential(*conv_bn(cin, cout, 3, stride), nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                             nn.BatchNorm2d(cout))
        shortcut = None if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                                          nn.BatchNorm2d(cout))
        return Residual(body, shortcut, nn.ReLU())

    def head(channels, classes, pool=nn.AdaptiveAvgPool2d):
        return [pool(1), nn.Flatten(), nn.Linear(channels, classes)]

    class CausalConv(nn.Module):
        def __init__(self, cin, cout, dilation):
            super().__init__()
            self.pad, self.conv = 2 * dilation, nn.Conv1d(cin, cout, 3, dilation=dilation)

        def forward(self, x):
            return self.conv(F.pad(x, (self.pad, 0)))

    class TCN(nn.Module):
        def __init__(self):
            super().__init__()
            blocks, cin = [], 3
            for dilation in (1, 2, 4):
                body = nn.Sequential(CausalConv(cin, 12, dilation), nn.ReLU(), CausalConv(12, 12, dilation))
                blocks.append(Residual(body, None if cin == 12 else nn.Conv1d(cin, 12, 1), nn.ReLU()))
                cin = 12
            self.blocks, self.head = nn.Sequential(*blocks), nn.Linear(12, 6)

        def forward(self, x):
            return self.head(self.blocks(x)[:, :, -1])

    class Recurrent(nn.Module):
        def __init__(self, layer, classes, last="output", conv=None):
            super().__init__()
            self.layer, self.conv, self.last = layer, conv, last
            self.head = nn.Linear(layer.hidden_size * (2 if layer.bidirectional else 1), classes)

        def forward(self, x):
            if self.conv is not None:  # (batch, channels, time) -> (batch, time, channels)
                x = torch.relu(self.conv(x)).permute(0, 2, 1)
            y, state = self.layer(x)
            h = state[0] if isinstance(self.layer, nn.LSTM) else state
            return self.head(h[-1] if self.last == "hidden" else y[:, -1])

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU())
            self.down2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.out = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))

        def forward(self, x):
            skip = self.down1(x)
            return self.out(torch.cat([self.up(self.down2(skip)), skip], dim=1))

    class UNetInterpolate(UNet):
        def __init__(self):
            super().__init__()
            self.up = nn.Conv2d(16, 8, 1)

        def forward(self, x):
            skip = self.down1(x)
            up = F.interpolate(self.up(self.down2(skip)), scale_factor=2, mode="nearest")
            return self.out(torch.cat([up, skip], dim=1))

    class AttentionPool(nn.Module):
        """Attention over time without a transformer: a score per step, softmax over time, the weighted sum."""

        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv1d(3, 16, 5, padding=2), nn.ReLU())
            self.score, self.head = nn.Conv1d(16, 1, 1), nn.Linear(16, 6)

        def forward(self, x):
            h = self.features(x)
            weights = torch.softmax(self.score(h), dim=2)
            return self.head((h * weights).sum(dim=2))

    class TokenModel(nn.Module):
        def __init__(self, conv=False):
            super().__init__()
            self.embedding = nn.Embedding(24, 8)
            self.conv = nn.Conv1d(8, 12, 3, padding=1) if conv else None
            self.head = nn.Linear(12 if conv else 8, 4)

        def forward(self, x):
            e = self.embedding(x)  # (batch, time, 8)
            if self.conv is None:
                return self.head(e.mean(dim=1))
            return self.head(torch.relu(self.conv(e.permute(0, 2, 1))).amax(dim=2))

    class ConvAutoencoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encode = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 12, 3, 2, 1), nn.ReLU())
            self.decode = nn.Sequential(nn.ConvTranspose2d(12, 8, 2, stride=2), nn.ReLU(),
                                        nn.ConvTranspose2d(8, 1, 2, stride=2), nn.Sigmoid())

        def forward(self, x):
            return self.decode(self.encode(x))

    torch.manual_seed(0)
    models = {
        # digits as 64-vectors
        "mlp_small": (mlp(64, 32, 10), "digits64"),
        "mlp_deep": (mlp(64, 48, 32, 16, 10), "digits64"),
        "mlp_tanh": (mlp(64, 32, 10, activation=nn.Tanh), "digits64"),
        "mlp_sigmoid": (mlp(64, 32, 10, activation=nn.Sigmoid), "digits64"),
        "mlp_gelu": (mlp(64, 32, 10, activation=nn.GELU), "digits64"),
        "mlp_hardswish": (mlp(64, 32, 10, activation=nn.Hardswish), "digits64"),
        "mlp_leaky": (mlp(64, 32, 10, activation=lambda: nn.LeakyReLU(0.1)), "digits64"),
        "mlp_silu": (mlp(64, 32, 10, activation=nn.SiLU), "digits64"),
        "mlp_elu": (mlp(64, 32, 10, activation=nn.ELU), "digits64"),
        "mlp_prelu": (nn.Sequential(nn.Linear(64, 32), nn.PReLU(32), nn.Linear(32, 10)), "digits64"),
        "mlp_layernorm": (nn.Sequential(nn.Linear(64, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 10)),
                          "digits64"),
        "mlp_dropout_bn": (nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                                         nn.Linear(32, 10)), "digits64"),
        # digits as 1x8x8 images
        "lenet": (nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                nn.Conv2d(6, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)), "digits"),
        "cnn_plain": (nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Conv2d(8, 16, 3), nn.ReLU(), nn.Flatten(),
                                    nn.Linear(256, 10)), "digits"),
        "cnn_bn": (nn.Sequential(*conv_bn(1, 8), *conv_bn(8, 16, stride=2), *head(16, 10)), "digits"),
        "cnn_avgpool": (nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                                      nn.Linear(64, 10)), "digits"),
        "cnn_grouped": (nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1, groups=2),
                                      nn.ReLU(), nn.Conv2d(16, 16, 1, groups=4), nn.ReLU(), *head(16, 10)), "digits"),
        "cnn_maxhead": (nn.Sequential(*conv_bn(1, 12), *conv_bn(12, 12, stride=2), *head(12, 10, nn.AdaptiveMaxPool2d)),
                        "digits"),
        "cnn_se": (nn.Sequential(*conv_bn(1, 12), SqueezeExcite(12, 4, nn.Sigmoid()), *conv_bn(12, 16, stride=2),
                                 *head(16, 10)), "digits"),
        "mobilenet_v2": (nn.Sequential(*conv_bn(1, 8, activation=nn.ReLU6()), inverted_residual(8, 8, 1, 2),
                                       inverted_residual(8, 12, 2, 3), inverted_residual(12, 12, 1, 3),
                                       *conv_bn(12, 32, 1, activation=nn.ReLU6()), *head(32, 10)), "digits"),
        "mobilenet_v3": (nn.Sequential(*conv_bn(1, 8, activation=nn.Hardswish()),
                                       inverted_residual(8, 8, 1, 1, nn.ReLU, se=True),
                                       inverted_residual(8, 12, 2, 3, nn.Hardswish, se=True),
                                       inverted_residual(12, 12, 1, 3, nn.Hardswish),
                                       *conv_bn(12, 24, 1, activation=nn.Hardswish()), *head(24, 10)), "digits"),
        "resnet8": (nn.Sequential(*conv_bn(1, 8), basic_block(8, 8, 1), basic_block(8, 16, 2), basic_block(16, 24, 2),
                                  *head(24, 10)), "digits"),
        # keyword-like sequences
        "ds_cnn": (nn.Sequential(nn.Conv2d(1, 16, (9, 3), (2, 1), (4, 1), bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                 *conv_bn(16, 16, groups=16), *conv_bn(16, 16, 1),
                                 *conv_bn(16, 16, stride=2, groups=16), *conv_bn(16, 24, 1), *head(24, 8)),
                   "keyword_image"),
        "gru_keyword": (Recurrent(nn.GRU(10, 32, batch_first=True), 8), "keyword"),
        "conv1d_keyword": (nn.Sequential(Transpose12(), nn.Conv1d(10, 16, 5, 2, 2), nn.ReLU(),
                                         nn.Conv1d(16, 16, 5, 2, 2, groups=16), nn.Conv1d(16, 24, 1), nn.ReLU(),
                                         nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(24, 8)), "keyword"),
        # synthetic sensor windows
        "lstm_activity": (Recurrent(nn.LSTM(3, 20, batch_first=True), 6, last="hidden"), "sensor_seq"),
        "rnn_activity": (Recurrent(nn.RNN(3, 16, batch_first=True), 6), "sensor_seq"),
        "bigru_activity": (Recurrent(nn.GRU(3, 10, batch_first=True, bidirectional=True), 6), "sensor_seq"),
        "lstm2_activity": (Recurrent(nn.LSTM(3, 12, num_layers=2, batch_first=True), 6, last="hidden"), "sensor_seq"),
        "conv1d_gru": (Recurrent(nn.GRU(8, 12, batch_first=True), 6, conv=nn.Conv1d(3, 8, 3, 2, 1)), "sensor"),
        "conv1d_sensor": (nn.Sequential(nn.Conv1d(3, 12, 5, padding="same"), nn.ReLU(), nn.MaxPool1d(2),
                                        nn.Conv1d(12, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
                                        nn.Flatten(), nn.Linear(16, 6)), "sensor"),
        "conv1d_dwsep": (nn.Sequential(nn.Conv1d(3, 12, 3, padding=1), nn.BatchNorm1d(12), nn.ReLU6(),
                                       nn.Conv1d(12, 12, 5, 2, 2, groups=12), nn.Conv1d(12, 16, 1),
                                       nn.BatchNorm1d(16), nn.ReLU6(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                                       nn.Linear(16, 6)), "sensor"),
        "conv1d_grouped": (nn.Sequential(nn.Conv1d(3, 12, 3, padding=1), nn.ReLU(),
                                         nn.Conv1d(12, 12, 3, padding=2, dilation=2, groups=4), nn.ReLU(),
                                         nn.AvgPool1d(4), nn.Flatten(), nn.Linear(96, 6)), "sensor"),
        "tcn": (TCN(), "sensor"),
        "attention_pool": (AttentionPool(), "sensor"),
        # per-pixel and reconstruction outputs
        "unet_tiny": (UNet(), "denoise"),
        "unet_interpolate": (UNetInterpolate(), "denoise"),
        "autoencoder": (nn.Sequential(nn.Linear(64, 24), nn.ReLU(), nn.Linear(24, 12), nn.ReLU(), nn.Linear(12, 24),
                                      nn.ReLU(), nn.Linear(24, 64), nn.Sigmoid()), "reconstruct64"),
        "conv_autoencoder": (ConvAutoencoder(), "reconstruct_image"),
        # integer token inputs
        "embedding_mean": (TokenModel(), "tokens"),
        "embedding_conv1d": (TokenModel(conv=True), "tokens"),
    }
    return models


def Transpose12():  # noqa: N802 (a layer, as nn's are named)
    """(batch, time, features) -> (batch, features, time), as a layer."""
    from torch import nn

    class Transpose(nn.Module):
        def forward(self, x):
            return x.transpose(1, 2)

    return Transpose()


def train(module, data: Dataset, epochs: int = 12, seed: int = 0) -> float:
    """A few epochs of Adam; the test accuracy (or the test MSE of a reconstruction)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    X, y = torch.from_numpy(data.X_train), torch.from_numpy(data.y_train)
    if data.task == "classify":
        loss_of = nn.CrossEntropyLoss()
    elif data.task == "pixels":
        loss_of, y = nn.BCEWithLogitsLoss(), y.float()
    else:
        loss_of = nn.MSELoss()
    optimiser = torch.optim.Adam(module.parameters(), lr=0.01)
    for _ in range(epochs):
        module.train()
        order = torch.randperm(len(X))
        for start in range(0, len(X), 64):
            batch = order[start:start + 64]
            optimiser.zero_grad()
            loss = loss_of(module(X[batch]), y[batch])
            loss.backward()
            optimiser.step()
    module.eval()
    with torch.no_grad():
        out = module(torch.from_numpy(data.X_test)).numpy()
    return score(out, data)


def score(out: np.ndarray, data: Dataset) -> float:
    """Test accuracy (classify: labels; pixels: elements) or the negated MSE (reconstruct): higher is better."""
    out = out.reshape(len(data.y_test), -1)
    want = data.y_test.reshape(len(data.y_test), -1)
    if data.task == "classify":
        return float(np.mean(np.argmax(out, axis=1) == want[:, 0]))
    if data.task == "pixels":
        return float(np.mean((out > 0) == (want > 0)))
    return -float(np.mean((out - want) ** 2))


def main() -> None:
    import torch
    from torch import nn

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("names", nargs="*", help="the models to train and export (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    cache = {}
    for name, (module, dataset) in zoo().items():
        if args.names and name not in args.names:
            continue
        data = cache.setdefault(dataset, DATASETS[dataset]())
        quality = train(module, data, args.epochs)
        x = torch.from_numpy(data.X_test[:1])
        torch.onnx.export(module, (x,), str(args.out / f"{name}.onnx"))  # the defaults: dynamo, external data
        torch.onnx.export(module, (x,), str(args.out / f"{name}_ts.onnx"), dynamo=False)  # TorchScript, opset 17
        if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules()):
            # each exporter folds BatchNorm into the Conv in its own float32 arithmetic, so the two default files
            # can hold weights an ulp apart; unfolded, both files hold the module's own parameters
            torch.onnx.export(module, (x,), str(args.out / f"{name}_unfolded.onnx"), optimize=False)
            torch.onnx.export(module, (x,), str(args.out / f"{name}_ts_unfolded.onnx"), dynamo=False,
                              do_constant_folding=False)
        print(f"{name:18s} {dataset:18s} {quality:.4f}", flush=True)


if __name__ == "__main__":
    main()
