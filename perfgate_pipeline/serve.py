"""Single-sample serving, for any model: the fused numba kernels' buffers, torch eager, ONNX Runtime.

A model's fast server copies its trained weights into one flat float32 buffer
(:func:`pack`) and runs the whole forward (DQN, PPO) or one streaming step (Mamba-2, TFT)
in a fused numba kernel (:mod:`perfgate_pipeline._kernels`). That is the floor on a CPU: a
few µs, against tens to hundreds for torch eager, whose cost at batch 1 is operator
dispatch, not arithmetic. Which kernel serves a model, and in which order its tensors are
packed, is the model module's (its ``ModelSpec.server``); this module has what every fast
server uses (:func:`pack`, :func:`zeros`) and :class:`MLPServer`, the kernel of a network
of two hidden layers and a linear head, which the DQN and PPO modules build theirs on.
:func:`perfgate_pipeline.models.fast_server` finds a model's own.

``eager_server(model)`` is the same call in torch, for the ``inference_latency_torch_us``
metric; ``OrtServer`` serves an ONNX export of a network with one flat input (DQN's, PPO's)
through ONNX Runtime with a bound input (the second-fastest option, and one without numba).

Every server takes one sample as a float32 numpy array (an observation of
``window * 16 + 1`` values for DQN/PPO, one bar's 16 features for Mamba-2/TFT) and returns
the model's output for it: Q values; policy logits then the value; class logits;
quantiles. Fast servers return their own output buffer, overwritten by the next call.
The stateful ones carry the model's recurrent state between calls; ``reset()`` starts a
new stream. All agree with the torch forward to 1e-5 (tests/pipeline/test_models_*.py).

Serving runs on the CPU whatever device the model trained on: at batch 1 a GPU's launch
latency alone exceeds these kernels' run time.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from perfgate_pipeline import _kernels as kernels

__all__ = [
    "MLPServer",
    "OrtServer",
    "Server",
    "eager_server",
    "pack",
    "zeros",
]

Server = Callable[[np.ndarray], Any]


_LINE = 16  # floats per 64-byte cache line


def zeros(shape: int | tuple[int, ...]) -> np.ndarray:
    """A float32 zero array starting on a cache line (numpy only promises 16 bytes).

    A kernel's vector loads that straddle cache lines cost more, and where numpy happens to
    put a buffer varies from process to process: without this the same forward ran at 3.7
    or 6.5 µs depending on the run.
    """
    n = int(np.prod(shape))
    raw = np.zeros(n + _LINE, dtype=np.float32)
    start = (-raw.ctypes.data // 4) % _LINE
    return raw[start : start + n].reshape(shape)


def pack(tensors: Sequence[torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """(flat float32 buffer of every tensor in order, int64 offsets: tensor i starts at off[i]).

    Each tensor starts on a cache line; the kernels take every matrix as (inputs, outputs),
    so callers pass ``linear.weight.T``. ``off[i + 1] - off[i]`` is tensor i's size.
    """
    arrays = [t.detach().to("cpu", torch.float32).contiguous().numpy().reshape(-1) for t in tensors]
    starts = np.cumsum([0] + [-(-a.size // _LINE) * _LINE for a in arrays])
    buf = zeros(int(starts[-1]))
    off = np.zeros(len(arrays) + 1, dtype=np.int64)
    for i, a in enumerate(arrays):
        buf[starts[i] : starts[i] + a.size] = a
        off[i] = starts[i]
    off[-1] = starts[-2] + arrays[-1].size if arrays else 0
    return buf, off


_ACTIVATIONS = {"relu": kernels.RELU, "tanh": kernels.TANH}  # MLPServer's, by name


class MLPServer:
    """x -> head(act(fc2(act(fc1(x))))): two hidden layers and a linear head, in one kernel call.

    DQN's Q-network serves this way (ReLU), and PPO's actor-critic (tanh), its two heads
    given as one layer: the logits' rows, then the value's.
    """

    def __init__(
        self,
        fc1: torch.nn.Linear,
        fc2: torch.nn.Linear,
        head_weight: torch.Tensor,
        head_bias: torch.Tensor,
        *,
        activation: str,
    ) -> None:
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(_ACTIVATIONS)}, got {activation!r}")
        self.w, self.off = pack([fc1.weight.T, fc1.bias, fc2.weight.T, fc2.bias, head_weight.T, head_bias])
        n1, n2 = fc1.out_features, fc2.out_features
        self.dims = np.array([_ACTIVATIONS[activation], n1, n2], dtype=np.int64)
        self.scratch = zeros(-(-n1 // _LINE) * _LINE + n2)
        self.out = zeros(head_weight.shape[0])

    def reset(self) -> None:
        """Stateless: nothing to reset."""

    def __call__(self, x: np.ndarray) -> np.ndarray:
        kernels.mlp_forward(x, self.w, self.off, self.dims, self.scratch, self.out)
        return self.out


class _EagerServer:
    """The model's own torch forward (or streaming step) at batch 1, under ``inference_mode``."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.state: Any = None
        self.reset()

    def reset(self) -> None:
        initial_state = getattr(self.model, "initial_state", None)  # a streaming model's
        if initial_state is not None:
            self.state = initial_state(1, self.device)

    def __call__(self, x: np.ndarray) -> torch.Tensor:
        with torch.inference_mode():
            xt = torch.from_numpy(x)[None].to(self.device, non_blocking=True)  # (1, D)
            if self.state is None:
                out = self.model(xt)
                return out[0] if isinstance(out, tuple) else out
            out, self.state = self.model.step(xt, self.state)  # type: ignore[operator]
            return out


def eager_server(model: torch.nn.Module) -> _EagerServer:
    """Torch eager serving of ``model`` on its own device, the baseline the fast path is compared to."""
    return _EagerServer(model)


class OrtServer:
    """An ONNX Runtime session over an export of a network with one flat input, input and output bound once.

    ``model`` maps (1, n_inputs) to its output (DQN's Q-network), or to several (PPO's
    actor-critic: logits, then the value), served as one row, concatenated in order (the
    layout of the model's fast server). ``n_inputs`` is, unless given, the input width of the
    model's first ``nn.Linear``.

    The session runs single-threaded and sequential (a second thread only adds wake-up
    latency at this size). Input and output are numpy buffers bound to the session through
    an ``IOBinding``, so a call copies the sample in and runs: no OrtValue or output array
    is made per call (``run_with_ort_values`` makes one, and measured 5-8x slower here).
    """

    def __init__(self, model: torch.nn.Module, n_inputs: int | None = None) -> None:
        import copy
        import io

        import onnxruntime as ort

        if n_inputs is None:
            first = next((m for m in model.modules() if isinstance(m, torch.nn.Linear)), None)
            if first is None:
                raise ValueError(f"{type(model).__name__} has no nn.Linear: give n_inputs")
            n_inputs = first.in_features
        dim = n_inputs
        buf = io.BytesIO()
        cpu_model = copy.deepcopy(model).cpu().eval()  # the caller's model stays where it is
        with torch.no_grad():
            single = isinstance(cpu_model(torch.zeros(1, dim)), torch.Tensor)
        module = cpu_model if single else _Concatenated(cpu_model)
        with warnings.catch_warnings():
            # The TorchScript exporter needs only `onnx` (the dynamo one would add onnxscript);
            # it announces its own deprecation, which is no news to a caller of this class.
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                module, (torch.zeros(1, dim),), buf, input_names=["obs"], output_names=["out"], dynamo=False
            )
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(buf.getvalue(), options, providers=["CPUExecutionProvider"])
        self.input = np.zeros((1, dim), dtype=np.float32)
        n_out = module(torch.zeros(1, dim)).shape[-1]
        self.output = np.zeros((1, n_out), dtype=np.float32)
        self.binding = self.session.io_binding()
        self._bound = ort.OrtValue.ortvalue_from_numpy(self.input)  # shares self.input's memory
        self.binding.bind_ortvalue_input("obs", self._bound)
        self.binding.bind_output("out", "cpu", 0, np.float32, list(self.output.shape), self.output.ctypes.data)

    def reset(self) -> None:
        """Stateless: nothing to reset."""

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.input[0] = x
        self.session.run_with_iobinding(self.binding)
        return self.output[0]


class _Concatenated(torch.nn.Module):
    """A model's several outputs as one row, in order; a (B,) output as one column (PPO's value)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.cat([out if out.dim() == 2 else out[:, None] for out in self.model(obs)], dim=-1)
