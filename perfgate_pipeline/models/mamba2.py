"""Mamba-2: selective state-space blocks (SSD), chunked for training, one bar at a time for inference.

Per position the model reads the 16 features of a bar and gives logits over the class of
the next bar's return (down, flat, up). Each block follows Dao & Gu (2024), "Transformers
are SSMs", with one group of B/C shared by every head:

1. ``in_proj``: d_model -> [z (d_inner), xBC (d_inner + 2N), dt (H)];
2. a depthwise causal conv1d (kernel 4) over xBC, then SiLU; split into x (H×P), B, C (N);
3. dt = softplus(dt + dt_bias), A = −exp(A_log) (one scalar per head);
4. the SSD scan h_t = exp(dt_t A) h_{t−1} + dt_t x_t B_tᵀ, y_t = h_t C_t + D x_t;
5. y = RMSNorm(y · SiLU(z)) (gated), ``out_proj`` d_inner -> d_model; pre-norm residual.

Training runs the scan in its chunked form (:func:`ssd_chunked`: a masked "attention"
inside chunks of Q positions and a recurrence over chunk states, all matmuls); inference
runs :meth:`Mamba2.step`, which keeps O(1) state per layer (the conv window and the
H×P×N SSM state) and costs the same for every new bar. Both compute the same function:
the tests compare them to each other and to a plain sequential loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from perfgate_pipeline import _kernels as kernels
from perfgate_pipeline import serve
from perfgate_pipeline.env import MarketData
from perfgate_pipeline.models.spec import ModelSpec
from perfgate_pipeline.train import SequenceTask, return_classes, sequence_task

__all__ = ["SPEC", "Mamba2", "Mamba2Config", "Mamba2Server", "Mamba2State", "mamba2_tensors", "segsum", "ssd_chunked"]


@dataclass
class Mamba2Config:
    n_features: int = 16  # inputs per bar
    n_classes: int = 3  # next-bar return: down, flat, up
    d_model: int = 64  # width of the residual stream
    n_layers: int = 2  # Mamba-2 blocks
    d_state: int = 32  # N: state size per head
    headdim: int = 32  # P: channels per head
    expand: int = 2  # d_inner = expand * d_model
    d_conv: int = 4  # causal conv kernel
    chunk_size: int = 16  # Q: positions per chunk of the training scan
    seq_len: int = 128  # training sequence length
    batch_size: int = 32  # sequences per training step
    lr: float = 2e-3  # AdamW learning rate
    eps: float = 1e-5  # RMSNorm epsilon

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model

    @property
    def n_heads(self) -> int:
        return self.d_inner // self.headdim

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.d_state

    def __post_init__(self) -> None:
        if self.d_inner % self.headdim:
            raise ValueError(f"expand * d_model = {self.d_inner} must be a multiple of headdim = {self.headdim}")


Mamba2State = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: conv window (B, conv_dim, d_conv), ssm (B, H, P, N)


class RMSNorm(nn.Module):
    """x / rms(x) * w; with ``z``, the gated form of Mamba-2: norm(x * SiLU(z))."""

    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        if z is not None:
            x = x * F.silu(z)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def segsum(a: torch.Tensor) -> torch.Tensor:
    """out[..., i, j] = a[..., j+1] + … + a[..., i] for j ≤ i (0 on the diagonal), −inf above it.

    Built as a masked cumulative sum rather than a difference of cumulative sums, which
    would cancel catastrophically for long chunks (the SSD paper's stable ``segsum``).
    """
    T = a.shape[-1]
    x = a[..., None].expand(*a.shape, T)  # (..., T, T): x[..., i, j] = a[..., i]
    strict = torch.tril(torch.ones(T, T, dtype=torch.bool, device=a.device), diagonal=-1)
    x = x.masked_fill(~strict, 0.0)
    out = torch.cumsum(x, dim=-2)
    keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=a.device), diagonal=0)
    return out.masked_fill(~keep, float("-inf"))


def ssd_chunked(
    x: torch.Tensor, a: torch.Tensor, B: torch.Tensor, C: torch.Tensor, chunk: int, h0: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The SSD scan in chunked form: y_t = C_t · h_t with h_t = exp(a_t) h_{t−1} + x_t ⊗ B_t.

    Args:
        x: (b, l, H, P), the input already scaled by dt; a: (b, l, H), the log-decay dt·A;
        B, C: (b, l, N), shared by every head; ``l`` a multiple of ``chunk``;
        h0: (b, H, P, N) state before the first position, zeros when ``None``.
    Returns:
        y (b, l, H, P) and the state after the last position (b, H, P, N).
    """
    b, L, H, P = x.shape
    N = B.shape[-1]
    c = L // chunk
    x = x.reshape(b, c, chunk, H, P)
    B = B.reshape(b, c, chunk, N)
    C = C.reshape(b, c, chunk, N)
    a = a.reshape(b, c, chunk, H).permute(0, 3, 1, 2)  # (b, H, c, Q)
    a_cum = torch.cumsum(a, dim=-1)  # (b, H, c, Q)

    # 1. inside each chunk: y_i = Σ_{j≤i} (C_i·B_j) exp(a_{j+1} + … + a_i) x_j
    decay = torch.exp(segsum(a))  # (b, H, c, Q, Q)
    CB = C @ B.transpose(-1, -2)  # (b, c, Q, Q)
    scores = CB[:, None] * decay  # (b, H, c, Q, Q)
    xh = x.permute(0, 3, 1, 2, 4)  # (b, H, c, Q, P)
    y_diag = scores @ xh  # (b, H, c, Q, P)

    # 2. the state each chunk adds by its end: Σ_j exp(a_{j+1} + … + a_Q) x_j ⊗ B_j
    to_end = torch.exp(a_cum[..., -1:] - a_cum)  # (b, H, c, Q)
    states = (xh * to_end[..., None]).transpose(-1, -2) @ B[:, None]  # (b, H, c, P, N)

    # 3. carry the states across chunk boundaries (a (c+1)×(c+1) decay matrix, no Python loop)
    if h0 is None:
        h0 = x.new_zeros(b, H, P, N)
    states = torch.cat([h0[:, :, None], states], dim=2)  # (b, H, c+1, P, N)
    chunk_decay = torch.exp(segsum(F.pad(a_cum[..., -1], (1, 0))))  # (b, H, c+1, c+1)
    carried = (chunk_decay @ states.reshape(b, H, c + 1, P * N)).reshape(b, H, c + 1, P, N)
    before, final = carried[:, :, :-1], carried[:, :, -1]  # state entering each chunk; after the last

    # 4. what the state entering a chunk contributes at each of its positions
    y_off = (C[:, None] @ before.transpose(-1, -2)) * torch.exp(a_cum)[..., None]  # (b, H, c, Q, P)
    y = (y_diag + y_off).permute(0, 2, 3, 1, 4).reshape(b, L, H, P)
    return y, final


class Mixer(nn.Module):
    """One Mamba-2 mixer: (B, L, d_model) -> (B, L, d_model), or one position with :meth:`step`."""

    def __init__(self, config: Mamba2Config) -> None:
        super().__init__()
        self.config = cfg = config
        self.in_proj = nn.Linear(cfg.d_model, 2 * cfg.d_inner + 2 * cfg.d_state + cfg.n_heads, bias=False)
        self.conv1d = nn.Conv1d(cfg.conv_dim, cfg.conv_dim, cfg.d_conv, groups=cfg.conv_dim, padding=cfg.d_conv - 1)
        # dt starts in [1e-3, 1e-1] (log-uniform), A in [1, 16], as in the reference initialisation
        dt = torch.exp(torch.rand(cfg.n_heads) * (torch.log(torch.tensor(0.1)) - torch.log(torch.tensor(1e-3))))
        dt = dt * 1e-3
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
        self.A_log = nn.Parameter(torch.log(torch.empty(cfg.n_heads).uniform_(1.0, 16.0)))
        self.D = nn.Parameter(torch.ones(cfg.n_heads))
        self.norm = RMSNorm(cfg.d_inner, cfg.eps)
        self.out_proj = nn.Linear(cfg.d_inner, cfg.d_model, bias=False)

    def _split(self, zxbcdt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        cfg = self.config
        return zxbcdt.split([cfg.d_inner, cfg.conv_dim, cfg.n_heads], dim=-1)  # type: ignore[return-value]

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        Bt, L, _ = u.shape
        z, xBC, dt = self._split(self.in_proj(u))  # (B, L, d_inner), (B, L, conv_dim), (B, L, H)
        xBC = self.conv1d(xBC.transpose(1, 2))[..., :L]  # (B, conv_dim, L); causal: the look-ahead dropped
        xBC = F.silu(xBC).transpose(1, 2).contiguous()  # contiguous again: the splits below reshape it
        x, Bm, Cm = xBC.split([cfg.d_inner, cfg.d_state, cfg.d_state], dim=-1)
        dt = F.softplus(dt + self.dt_bias)  # (B, L, H)
        A = -torch.exp(self.A_log)  # (H,)
        x = x.reshape(Bt, L, cfg.n_heads, cfg.headdim)  # (B, L, H, P)
        pad = (-L) % cfg.chunk_size  # zero input and zero decay at the end change nothing before it
        xs, a = x * dt[..., None], dt * A
        if pad:
            xs, a = F.pad(xs, (0, 0, 0, 0, 0, pad)), F.pad(a, (0, 0, 0, pad))
            Bm, Cm = F.pad(Bm, (0, 0, 0, pad)), F.pad(Cm, (0, 0, 0, pad))
        y, _ = ssd_chunked(xs, a, Bm, Cm, cfg.chunk_size)
        y = y[:, :L] + x * self.D[:, None]  # (B, L, H, P)
        y = self.norm(y.reshape(Bt, L, cfg.d_inner), z)
        return self.out_proj(y)

    def step(
        self, u: torch.Tensor, conv_state: torch.Tensor, ssm_state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One position: u (B, d_model) and the state before it -> (output, new conv state, new SSM state)."""
        cfg = self.config
        Bt = u.shape[0]
        z, xBC, dt = self._split(self.in_proj(u))  # (B, d_inner), (B, conv_dim), (B, H)
        conv_state = torch.cat([conv_state[:, :, 1:], xBC[:, :, None]], dim=-1)  # (B, conv_dim, d_conv)
        xBC = F.silu((conv_state * self.conv1d.weight[:, 0]).sum(-1) + self.conv1d.bias)
        x, Bm, Cm = xBC.split([cfg.d_inner, cfg.d_state, cfg.d_state], dim=-1)
        dt = F.softplus(dt + self.dt_bias)  # (B, H)
        dA = torch.exp(dt * -torch.exp(self.A_log))  # (B, H)
        x = x.reshape(Bt, cfg.n_heads, cfg.headdim)  # (B, H, P)
        ssm_state = ssm_state * dA[:, :, None, None] + (x * dt[..., None])[..., None] * Bm[:, None, None, :]
        y = (ssm_state @ Cm[:, None, :, None]).squeeze(-1) + x * self.D[:, None]  # (B, H, P)
        y = self.norm(y.reshape(Bt, cfg.d_inner), z)
        return self.out_proj(y), conv_state, ssm_state


class Block(nn.Module):
    def __init__(self, config: Mamba2Config) -> None:
        super().__init__()
        self.norm = RMSNorm(config.d_model, config.eps)
        self.mixer = Mixer(config)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.mixer(self.norm(h))


class Mamba2(nn.Module):
    """features (B, L, 16) -> logits (B, L, n_classes); position t sees bars up to t only."""

    def __init__(self, config: Mamba2Config) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Linear(config.n_features, config.d_model)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm_f = RMSNorm(config.d_model, config.eps)
        self.head = nn.Linear(config.d_model, config.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)  # (B, L, d_model)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm_f(h))

    def initial_state(self, batch: int = 1, device: torch.device | str | None = None) -> Mamba2State:
        """The state before the first bar: zeros, one (conv window, SSM state) pair per layer."""
        cfg = self.config
        dev = device if device is not None else self.embed.weight.device
        kw = {"device": dev, "dtype": self.embed.weight.dtype}
        return [
            (
                torch.zeros(batch, cfg.conv_dim, cfg.d_conv, **kw),
                torch.zeros(batch, cfg.n_heads, cfg.headdim, cfg.d_state, **kw),
            )
            for _ in range(cfg.n_layers)
        ]

    def step(self, x: torch.Tensor, state: Mamba2State) -> tuple[torch.Tensor, Mamba2State]:
        """One new bar x (B, 16) -> (its logits (B, n_classes), the state after it)."""
        h = self.embed(x)  # (B, d_model)
        new_state: Mamba2State = []
        for layer, (conv_state, ssm_state) in zip(self.layers, state, strict=True):
            out, conv_state, ssm_state = layer.mixer.step(layer.norm(h), conv_state, ssm_state)
            h = h + out
            new_state.append((conv_state, ssm_state))
        return self.head(self.norm_f(h)), new_state


def _task(config: Mamba2Config, data: MarketData, *, device: str = "cpu", seed: int = 0) -> SequenceTask:
    """Windows of the series; the target of a bar is the tercile of the next return among the series' returns."""
    torch.manual_seed(seed)
    r = data.returns
    edges = (float(np.quantile(r, 1 / 3)), float(np.quantile(r, 2 / 3)))
    n_classes = config.n_classes

    def target_fn(ret: np.ndarray) -> np.ndarray:
        return return_classes(ret, edges)

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.reshape(-1, n_classes), y.reshape(-1))

    return sequence_task(Mamba2(config).to(device), data, config, target_fn=target_fn, loss_fn=loss_fn, seed=seed)


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
        self.w, self.off = serve.pack(mamba2_tensors(model))
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
        self.conv = serve.zeros((cfg.n_layers, cfg.d_conv, cfg.conv_dim))
        self.ssm = serve.zeros((cfg.n_layers, cfg.n_heads, cfg.d_state, cfg.headdim))
        size = kernels.mamba2_scratch_size(cfg.d_model, cfg.d_inner, cfg.d_state, cfg.n_heads, cfg.headdim)
        self.scratch = serve.zeros(size)
        self.out = serve.zeros(cfg.n_classes)
        self.eps = np.float32(cfg.eps)

    def reset(self) -> None:
        self.conv[:] = 0.0
        self.ssm[:] = 0.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        kernels.mamba2_step(x, self.w, self.off, self.dims, self.conv, self.ssm, self.scratch, self.out, self.eps)
        return self.out


def _server(model: Mamba2) -> Mamba2Server:
    return Mamba2Server(model)


SPEC = ModelSpec(
    name="mamba2",
    config=Mamba2Config,
    model=Mamba2,
    task=_task,
    server=_server,
    kind="compute",
    # under valgrind one training step takes about a minute (831 M instructions, FMA-heavy BLAS,
    # which valgrind emulates in software). Its first call counts 1.3 % more (AdamW's state is
    # made); from the second on the calls repeat each other to 0.013 % (benchmarks/counts_results.txt).
    # So under --measure counts that first call is the uncounted one, and two calls are counted.
    counted_warmup=0,
    counted_calls=2,
)
