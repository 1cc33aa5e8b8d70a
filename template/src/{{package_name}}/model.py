"""A small MLP classifier: enough to fit the embedded synthetic data in a few epochs."""

from torch import nn


def make_model(feature_dim: int, num_classes: int, hidden: int = 128) -> nn.Module:
    return nn.Sequential(
        nn.Linear(feature_dim, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, num_classes),
    )
