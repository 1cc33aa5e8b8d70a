"""The classifier: a small CNN for images, an MLP for anything else, picked by the input's shape.

Images arrive as uint8 [3, H, W] (decode.py) and are scaled to [0, 1] on the device, so the
worker-to-trainer hand-off moves a quarter of the bytes of float32. Dropout draws from each
rank's own random state (checkpoint.seed_rank), which a checkpoint saves and a resume restores.
"""

import math

import torch
from torch import nn

DROPOUT = 0.1


class ToUnitRange(nn.Module):
    """uint8 in [0, 255] -> float in [0, 1]; float input passes unchanged."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float() / 255 if x.dtype == torch.uint8 else x.float()


def make_model(example: torch.Tensor, num_classes: int, width: int = 32) -> nn.Module:
    """A model for inputs shaped like `example` (one decoded sample)."""
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
