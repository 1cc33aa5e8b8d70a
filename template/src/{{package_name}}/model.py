"""The classifier: a small CNN for images, a bag of byte n-grams for text, an MLP for anything
else, picked by the input's shape and type (`--model small`); ResNet-18 (`--model resnet18`,
torchvision's architecture and parameter names, built here so that it needs no extra); or any
other torchvision classification model by name (`--model resnet50`, `convnext_tiny`, ...) with
the vision extra: pip install -e '.[vision]'.

Images arrive as uint8 [3, H, W] (decode.py) and are scaled to [0, 1] on the device, so the
worker-to-trainer hand-off moves a quarter of the bytes of float32. Texts arrive as their
UTF-8 bytes, uint8 [length], zero-padded to the batch's longest. Dropout draws from each
rank's own random state (checkpoint.seed_rank), which a checkpoint saves and a resume restores.
"""

import importlib
import math

import torch
from torch import nn

from .harness.errors import DataError

DROPOUT = 0.1
# n-grams of ids are hashed from their value mod this prime (2^31 - 1): the multiplicative hash of
# ByteNgrams then stays inside int64 for any vocabulary, and a byte trigram (< 257^3) is its own value.
HASH_PRIME = 2**31 - 1


class ToUnitRange(nn.Module):
    """uint8 in [0, 255] -> float in [0, 1]; float input passes unchanged."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float() / 255 if x.dtype == torch.uint8 else x.float()


class ByteNgrams(nn.Module):
    """Text as ids (its UTF-8 bytes by default, or a tokenizer's: data/text.py; 0: padding) -> the mean
    embedding of its 1-, 2- and 3-grams of ids,
    hashed into BUCKETS rows (fastText's bag of n-grams), -> class logits. A word shows as the
    n-grams inside it, so a class that shows in the words is learned in a few passes, in any
    script and with no tokenizer; word order beyond three bytes is not seen."""

    BUCKETS = 1 << 14  # row 0 is padding: the n-grams that reach into it are left out of the mean
    ORDERS = (1, 2, 3)

    def __init__(self, num_classes: int, dim: int, vocab_size: int = 256) -> None:
        super().__init__()
        self.base = vocab_size + 1  # an n-gram of ids as a number in this base, reduced mod HASH_PRIME
        self.embed = nn.EmbeddingBag(self.BUCKETS, dim, mode="mean", padding_idx=0)
        self.out = nn.Sequential(nn.Dropout(DROPOUT), nn.Linear(dim, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.long()
        ids = []
        for n in self.ORDERS:
            span = x.shape[1] - n + 1
            if span < 1:
                continue
            gram = torch.zeros_like(x[:, :span])
            for i in range(n):
                gram = (gram * self.base + x[:, i : i + span]) % HASH_PRIME
            bucket = 1 + (gram * 2654435761 + n) % (self.BUCKETS - 1)  # a multiplicative hash, one per order
            padding = (x[:, :span] == 0) | (x[:, n - 1 : n - 1 + span] == 0)  # padding only ever ends a text
            ids.append(bucket.masked_fill(padding, 0))
        return self.out(self.embed(torch.cat(ids, dim=1)))


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with a shortcut (a 1x1 convolution where the shape changes)."""

    def __init__(self, inputs: int, outputs: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.downsample = None
        if stride != 1 or inputs != outputs:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + shortcut)


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2015) as torchvision builds it: the same layers, initialisation and
    parameter names (`layer2.0.downsample.0.weight`, `fc.bias`), so torchvision's weights load
    into it; 11,181,642 parameters with 10 classes."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = (64, 128, 256, 512)
        for i, width in enumerate(widths):
            inputs, stride = (64, 1) if i == 0 else (widths[i - 1], 2)
            setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(inputs, width, stride), BasicBlock(width, width)))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


NATIVE = {"resnet18": ResNet18}  # models built here, without torchvision


def torchvision(name: str):
    """The torchvision module, for --model `name`; DataError naming the extra when it is not installed
    or does not load. Without it no list of its models says whether `name` is one of them: the line
    names the models there are here, and the extra for torchvision's."""
    try:
        return importlib.import_module("torchvision")
    except ImportError:
        raise DataError(
            f"--model {name}: no such model here (small, resnet18), and torchvision, which has the others by "
            "name (resnet50, vit_b_16, ...), is not installed: pass --model small or resnet18, or install the "
            "vision extra for a torchvision model: pip install -e '.[vision]' (the torchvision build of your torch)"
        ) from None
    except (OSError, RuntimeError) as err:  # a build made for another torch (CUDA libraries missing, ops unknown)
        raise DataError(
            f"torchvision does not load with this torch ({str(err).strip()[:150]}): install the torchvision build "
            "made for your torch, or pass --model small"
        ) from None


def check_vision_model(name: str) -> None:
    """ResNet-18, or a torchvision classification model of that name; DataError listing some when not."""
    if name in NATIVE:
        return
    models = torchvision(name).models
    known = models.list_models(module=models)
    if name not in known:
        some = ", ".join(n for n in known if n.startswith(("resnet", "convnext", "efficientnet_b", "vit")))
        raise DataError(
            f"--model {name}: torchvision has no classification model of that name: pass small or one of {some}"
        )


def vision_model(name: str, example: torch.Tensor, num_classes: int) -> nn.Module:
    """ResNet-18 or torchvision's `name` (randomly initialised) with `num_classes` outputs, for uint8 images
    shaped like `example`; DataError when the images are not images or too small for it."""
    check_vision_model(name)
    if example.dim() != 3 or example.shape[0] != 3:
        raise DataError(
            f"--model {name} takes RGB images, not samples of shape {list(example.shape)}: pass --model small"
        )
    if name in NATIVE:
        net = NATIVE[name](num_classes)
    else:
        models = torchvision(name).models
        try:  # vision transformers are built for one image size: theirs is --image-size
            net = models.get_model(name, num_classes=num_classes, image_size=example.shape[-1])
        except TypeError:  # the convolutional ones take any size
            net = models.get_model(name, num_classes=num_classes)
    model = nn.Sequential(ToUnitRange(), net)
    try:  # too small an image fails inside the network: say so before training
        with torch.no_grad():
            model.eval()(example.unsqueeze(0).expand(2, -1, -1, -1))
    except RuntimeError as err:
        raise DataError(
            f"--model {name} does not take {example.shape[-2]}x{example.shape[-1]} images "
            f"({str(err).strip().splitlines()[0][:120]}): pass a larger --image-size"
        ) from None
    return model.train()


def make_model(example: torch.Tensor, num_classes: int, width: int = 32, vocab_size: int = 256) -> nn.Module:
    """A model for inputs shaped like `example` (one decoded sample); a text's ids are 1 .. vocab_size - 1."""
    if example.dim() == 1 and not example.is_floating_point():  # text: its ids (decode.py, data/text.py)
        return ByteNgrams(num_classes, 2 * width, vocab_size)
    if example.dim() == 3:  # [channels, height, width]
        channels = example.shape[0]
        return nn.Sequential(
            ToUnitRange(),
            nn.Conv2d(channels, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Dropout(DROPOUT),
            nn.Linear(2 * width, num_classes),
        )
    hidden = 4 * width
    return nn.Sequential(
        ToUnitRange(),
        nn.Flatten(),
        nn.Linear(math.prod(example.shape), hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Dropout(DROPOUT),
        nn.Linear(hidden, num_classes),
    )
