"""PyTorch's own layers behind the assignments' interfaces: the trusted side of module comparisons.

An assignment asks for, say, ``LSTM(d_in, d_hidden)`` whose states are
``(B, d)`` tensors; PyTorch's ``nn.LSTM`` wants ``(1, B, d)``. The adapters
here take the assignment's arguments and shapes and keep PyTorch's parameter
names (``as_ours`` maps a fused layer's names to the assignment's), so the
checks (`lmcourse.grading.compare`) and the benchmarks use one definition.
"""

from __future__ import annotations

import types

from torch import nn

__all__ = ["RECURRENT", "TorchElmanCell", "TorchElmanRNN", "TorchLSTM", "TorchLSTMCell", "as_ours"]


class TorchElmanCell(nn.RNNCell):
    """nn.RNNCell as `ElmanCell(d_in, d_hidden)`: the same parameter names."""

    def __init__(self, d_in, d_hidden):
        super().__init__(d_in, d_hidden)


class TorchLSTMCell(nn.LSTMCell):
    """nn.LSTMCell as `LSTMCell(d_in, d_hidden)`: the same parameter names."""

    def __init__(self, d_in, d_hidden):
        super().__init__(d_in, d_hidden)


class TorchElmanRNN(nn.Module):
    """nn.RNN(batch_first=True) as `ElmanRNN`: states (B, d) in and out, instead of (1, B, d)."""

    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.rnn = nn.RNN(d_in, d_hidden, batch_first=True)

    def forward(self, x, h=None):
        outputs, h_n = self.rnn(x, None if h is None else h.unsqueeze(0))
        return outputs, h_n[0]


class TorchLSTM(nn.Module):
    """nn.LSTM(batch_first=True) as `LSTM`: states ((B, d), (B, d)) in and out."""

    def __init__(self, d_in, d_hidden):
        super().__init__()
        self.rnn = nn.LSTM(d_in, d_hidden, batch_first=True)

    def forward(self, x, state=None):
        if state is not None:
            state = (state[0].unsqueeze(0), state[1].unsqueeze(0))
        outputs, (h_n, c_n) = self.rnn(x, state)
        return outputs, (h_n[0], c_n[0])


# the namespace a check passes as `trusted=` (``trusted_cls="TorchLSTM"``)
RECURRENT = types.SimpleNamespace(TorchElmanCell=TorchElmanCell, TorchLSTMCell=TorchLSTMCell,
                                  TorchElmanRNN=TorchElmanRNN, TorchLSTM=TorchLSTM)


def as_ours(name: str) -> str:
    """A fused PyTorch layer's parameter name as the assignment's: rnn.weight_ih_l0 -> cell.weight_ih."""
    return "cell." + name[len("rnn."):-len("_l0")] if name.startswith("rnn.") else name
