"""The log-odds arithmetic of the pass/fail likelihood (``uplift.MODEL.logistic``):
the posterior mode of a Gaussian-process classifier, and the conversions
between pass chances and log-odds, numpy only."""

from __future__ import annotations

import numpy as np

NEWTON_STEPS = 25  # at most, for the logistic fit's mode (it takes 4-6)
EDGE = 1e-4  # fitted pass chances stay this far from 0 and 1


def laplace(gram: np.ndarray, y: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """The mode of a Gaussian-process classifier with covariance ``gram`` and
    mean ``offset`` (log-odds) fitted to outcomes ``y`` in [0, 1] (a graded
    failure is a fractional one), by Newton's method in its stable form
    (Rasmussen & Williams, algorithm 3.1): the weights ``a`` with latent
    ``offset + gram @ a``, which at the mode are ``y - p``."""
    n = len(y)
    a = np.zeros(n)
    latent = offset.copy()
    eye = np.eye(n)
    for _ in range(NEWTON_STEPS):
        p = np.clip(sigmoid(latent), EDGE, 1.0 - EDGE)
        w = p * (1.0 - p)
        root = np.sqrt(w)
        b = w * (latent - offset) + (y - p)
        system = eye + root[:, None] * gram * root[None, :]
        a = b - root * np.linalg.solve(system, root * (gram @ b))
        moved = offset + gram @ a
        done = float(np.max(np.abs(moved - latent))) < 1e-6
        latent = moved
        if done:
            break
    return a


def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(x, -30.0, 30.0))), dtype=np.float64)


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, EDGE, 1.0 - EDGE)
    return np.asarray(np.log(p / (1.0 - p)), dtype=np.float64)


def slope(chance: np.ndarray) -> np.ndarray:
    """How much a pass chance moves per unit of log-odds there."""
    p = np.clip(chance, EDGE, 1.0 - EDGE)
    return np.asarray(p * (1.0 - p), dtype=np.float64)
