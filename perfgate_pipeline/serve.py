"""Single-sample serving: the fastest path per model, torch eager beside it, and ONNX Runtime.

``fast_server(model)`` copies a trained model's weights into one flat float32 buffer and
returns a callable that runs the whole forward (DQN, PPO) or one streaming step (Mamba-2,
TFT) in a fused numba kernel (:mod:`perfgate_pipeline._kernels`). That is the floor on a
CPU: a few µs, against tens to hundreds for torch eager, whose cost at batch 1 is operator
dispatch, not arithmetic. ``eager_server(model)`` is the same call in torch, for the
``inference_latency_torch_us`` metric; ``OrtServer`` serves an ONNX export of the MLPs
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
from perfgate_pipeline import models
from perfgate_pipeline.models.dqn import QNetwork
from perfgate_pipeline.models.mamba2 import Mamba2
from perfgate_pipeline.models.ppo import ActorCritic
from perfgate_pipeline.models.tft import TFT

__all__ = [
    "MLPServer",
    "Mamba2Server",
    "OrtServer",
    "Server",
    "TFTServer",
    "eager_server",
    "fast_server",
    "pack",
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


class MLPServer:
    """DQN's Q-network or PPO's actor-critic (heads packed as one layer: logits, then value)."""

    def __init__(self, model: QNetwork | ActorCritic) -> None:
        if isinstance(model, ActorCritic):
            head_w = torch.cat([model.pi.weight, model.v.weight])
            head_b = torch.cat([model.pi.bias, model.v.bias])
            act = kernels.TANH
        else:
            head_w, head_b = model.head.weight, model.head.bias
            act = kernels.RELU
        self.w, self.off = pack(
            [model.fc1.weight.T, model.fc1.bias, model.fc2.weight.T, model.fc2.bias, head_w.T, head_b]
        )
        n1, n2 = model.fc1.out_features, model.fc2.out_features
        self.dims = np.array([act, n1, n2], dtype=np.int64)
        self.scratch = zeros(-(-n1 // _LINE) * _LINE + n2)
        self.out = zeros(head_w.shape[0])

    def reset(self) -> None:
        """Stateless: nothing to reset."""

    def __call__(self, x: np.ndarray) -> np.ndarray:
        kernels.mlp_forward(x, self.w, self.off, self.dims, self.scratch, self.out)
        return self.out


def mamba2_tensors(model: Mamba2) -> list[torch.Tensor]:
    """The packing order of :func:`perfgate_pipeline._kernels.mamba2_step`."""
    out = [model.embed.weight.T, model.embed.bias, model.norm_f.weight, model.head.weight.T, model.head.bias]
    for layer in model.layers:
        mx = layer.mixer
        out += [
            layer.norm.weight,
            mx.in_proj.weight.T,
            mx.conv1d.weight[:, 0].T,  # (K, conv_dim): one tap of every channel at a time
            mx.conv1d.bias,
            mx.dt_bias,
            -torch.exp(mx.A_log),  # the same float32 op as Mixer.step, done once
            mx.D,
            mx.norm.weight,
            mx.out_proj.weight.T,
        ]
    return out


class Mamba2Server:
    """Mamba-2's recurrent step: one bar's features in, the class logits of the next return out."""

    def __init__(self, model: Mamba2) -> None:
        cfg = model.config
        self.config = cfg
        self.w, self.off = pack(mamba2_tensors(model))
        self.dims = np.array(
            [
                cfg.n_features,
                cfg.d_model,
                cfg.n_layers,
                cfg.d_inner,
                cfg.d_state,
                cfg.n_heads,
                cfg.headdim,
                cfg.d_conv,
                cfg.n_classes,
            ],
            dtype=np.int64,
        )
        # the torch state's axes swapped: (K, conv_dim) and (N, P) put the kernel's inner loops on contiguous memory
        self.conv = zeros((cfg.n_layers, cfg.d_conv, cfg.conv_dim))
        self.ssm = zeros((cfg.n_layers, cfg.n_heads, cfg.d_state, cfg.headdim))
        size = kernels.mamba2_scratch_size(cfg.d_model, cfg.d_inner, cfg.d_state, cfg.n_heads, cfg.headdim)
        self.scratch = zeros(size)
        self.out = zeros(cfg.n_classes)
        self.eps = np.float32(cfg.eps)

    def reset(self) -> None:
        self.conv[:] = 0.0
        self.ssm[:] = 0.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        kernels.mamba2_step(x, self.w, self.off, self.dims, self.conv, self.ssm, self.scratch, self.out, self.eps)
        return self.out


def tft_tensors(model: TFT) -> list[torch.Tensor]:
    """The packing order of :func:`perfgate_pipeline._kernels.tft_step`; every matrix as (in, out)."""

    def lin(m: Any) -> list[torch.Tensor]:
        return [m.weight.T, m.bias]

    def grn(g: Any) -> list[torch.Tensor]:
        skip = lin(g.skip) if isinstance(g.skip, torch.nn.Linear) else []
        return [*skip, *lin(g.fc1), *lin(g.fc2), *lin(g.glu.proj), g.norm.weight, g.norm.bias]

    vsn, pv, lstm, att = model.vsn, model.vsn.per_var, model.lstm, model.attn
    # Each embedding is affine in its one input, e_v = x_v a_v + b_v, so whatever is linear in
    # the embeddings is affine in x: the selection GRN's skip and fc1 (from V·dv inputs) and
    # the per-variable GRNs' first layer fold into small matrices on x, computed once here in
    # float64. Same function, a sixteenth of the multiply-adds at batch 1.
    a = vsn.emb_w.detach().double().reshape(pv.w1.shape[0], -1)  # (V, dv)
    b = vsn.emb_b.detach().double().reshape(a.shape)
    sel = vsn.select

    def fold(linear: torch.nn.Linear) -> list[torch.Tensor]:
        W = linear.weight.detach().double().reshape(linear.out_features, *a.shape)  # (out, V, dv)
        return [torch.einsum("ovj,vj->vo", W, a), linear.bias.detach().double() + torch.einsum("ovj,vj->o", W, b)]

    w1 = pv.w1.detach().double()  # (V, in, out)
    b1 = pv.b1.detach().double().reshape(a.shape)
    first = [torch.einsum("vj,vjo->vo", a, w1), b1 + torch.einsum("vj,vjo->vo", b, w1)]
    return [
        vsn.emb_w,
        vsn.emb_b,
        *fold(sel.skip),
        *fold(sel.fc1),
        *lin(sel.fc2),
        *lin(sel.glu.proj),
        sel.norm.weight,
        sel.norm.bias,
        *first,  # (V, dv): x_v times the first, plus the second
        pv.w2,
        pv.b2,
        pv.wg,
        pv.bg,
        pv.ln_w,
        pv.ln_b,
        *lin(vsn.out),
        lstm.weight_ih_l0.T,
        lstm.weight_hh_l0.T,
        lstm.bias_ih_l0,
        lstm.bias_hh_l0,
        *lin(model.lstm_gate.proj),
        model.lstm_norm.weight,
        model.lstm_norm.bias,
        *grn(model.enrich),
        *lin(att.q),
        *lin(att.k),
        *lin(att.v),
        *lin(att.out),
        *lin(model.attn_gate.proj),
        model.attn_norm.weight,
        model.attn_norm.bias,
        *grn(model.ff),
        *lin(model.out_gate.proj),
        model.out_norm.weight,
        model.out_norm.bias,
        *lin(model.head),
    ]


class TFTServer:
    """TFT's streaming step: one bar's features in, quantiles of the next return out."""

    def __init__(self, model: TFT) -> None:
        cfg = model.config
        self.config = cfg
        self.w, self.off = pack(tft_tensors(model))
        self.dims = np.array([cfg.n_features, cfg.d_var, cfg.d_model, cfg.n_heads, cfg.attn_window], dtype=np.int64)
        d, W = cfg.d_model, cfg.attn_window
        self.state = zeros(2 * d + W * d + W * cfg.d_head)
        size = kernels.tft_scratch_size(cfg.n_features, cfg.d_var, d, cfg.n_heads, W)
        self.scratch = zeros(size)
        self.out = zeros(len(cfg.quantiles))
        self.seen = 0

    def reset(self) -> None:
        self.state[:] = 0.0
        self.seen = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        kernels.tft_step(x, self.w, self.off, self.dims, self.state, self.seen, self.scratch, self.out)
        self.seen += 1
        return self.out


def fast_server(model: torch.nn.Module) -> Server:
    """The fused numba server of a trained model (weights copied: later training does not change it),
    as its entry in the model registry (:mod:`perfgate_pipeline.models`) makes it."""
    try:
        spec = models.spec_of(model)
    except TypeError:
        raise TypeError(f"no fast server for {type(model).__name__}") from None
    server: Server = spec.server(model)
    return server


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
    """An ONNX Runtime session over an export of DQN's or PPO's network, input and output bound once.

    The session runs single-threaded and sequential (a second thread only adds wake-up
    latency at this size). Input and output are numpy buffers bound to the session through
    an ``IOBinding``, so a call copies the sample in and runs: no OrtValue or output array
    is made per call (``run_with_ort_values`` makes one, and measured 5-8x slower here).
    """

    def __init__(self, model: QNetwork | ActorCritic) -> None:
        import copy
        import io

        import onnxruntime as ort

        dim = model.fc1.in_features
        buf = io.BytesIO()
        cpu_model = copy.deepcopy(model).cpu().eval()  # the caller's model stays where it is
        module = cpu_model if isinstance(cpu_model, QNetwork) else _ConcatHeads(cpu_model)
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


class _ConcatHeads(torch.nn.Module):
    """PPO's two outputs as one (logits, then value), the layout of the fast server."""

    def __init__(self, model: ActorCritic) -> None:
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        logits, value = self.model(obs)
        return torch.cat([logits, value[:, None]], dim=-1)
