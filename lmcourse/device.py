"""Which device to compute on, and how to make a run repeatable.

The course's code is device-agnostic: every chapter, solution and check asks
:func:`pick_device` and moves tensors there, so the same notebook trains on a
laptop CPU and on a GPU without edits.

The choice is CUDA when present, else CPU. Apple's MPS backend is used only
when asked for (``LMCOURSE_DEVICE=mps``): it is known to give wrong results
for some operations, and a course must not teach from wrong losses.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

ENV_VAR = "LMCOURSE_DEVICE"


def pick_device(prefer: str | None = None) -> torch.device:
    """Return the device to compute on.

    Order: the ``prefer`` argument, then the ``LMCOURSE_DEVICE`` setting, then
    CUDA if available, else CPU. An explicit request for a device that is not
    present raises a ``RuntimeError`` that says what is available, rather than
    silently training somewhere else.

    >>> pick_device("cpu")
    device(type='cpu')
    """
    choice = prefer or os.environ.get(ENV_VAR, "").strip() or None
    if choice is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(choice)
    except RuntimeError as err:
        raise RuntimeError(
            f"{ENV_VAR}={choice!r} is not a device name; expected 'cpu', 'cuda', 'cuda:N' or 'mps'"
        ) from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device {choice!r} was requested but CUDA is not available here; "
            f"unset {ENV_VAR} or set it to 'cpu'"
        )
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise RuntimeError(
            f"device {choice!r} was requested but only {torch.cuda.device_count()} CUDA device(s) exist"
        )
    if device.type == "mps" and not (
        getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()
    ):
        raise RuntimeError(
            f"device {choice!r} was requested but MPS is not available here; "
            f"unset {ENV_VAR} or set it to 'cpu'"
        )
    return device


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python's, NumPy's and torch's global generators (CPU and CUDA).

    Returns a fresh ``torch.Generator`` seeded the same way, for code that
    prefers an explicit generator over global state.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return torch.Generator().manual_seed(seed)
