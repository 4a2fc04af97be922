"""lmcourse.device: the override setting and seeding."""

import random

import numpy as np
import pytest
import torch

from lmcourse.device import ENV_VAR, pick_device, seed_everything


def test_default_is_cuda_when_present_else_cpu(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device().type == expected


def test_override_by_setting_and_argument(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "cpu")
    assert pick_device() == torch.device("cpu")
    monkeypatch.setenv(ENV_VAR, "nonsense")
    with pytest.raises(RuntimeError, match="not a device name"):
        pick_device()
    assert pick_device("cpu") == torch.device("cpu"), "the argument wins over the setting"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_asking_for_missing_cuda_is_an_error(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "cuda")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        pick_device()


def test_mps_only_when_asked(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert pick_device().type != "mps"


def test_seed_everything_repeats_all_generators():
    def draw():
        return random.random(), np.random.rand(), torch.rand(1).item()

    g = seed_everything(123)
    a = draw() + (torch.rand(1, generator=g).item(),)
    g = seed_everything(123)
    b = draw() + (torch.rand(1, generator=g).item(),)
    assert a == b
    seed_everything(124)
    assert draw() != a[:3]
