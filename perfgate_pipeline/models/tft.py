"""TFT: a Temporal Fusion Transformer predicting quantiles of the next bar's return.

After Lim et al. (2021), for inputs that are all observed (the 16 features; no static
covariates, no known future inputs), one forecast per position:

1. **variable selection**: each feature gets its own linear embedding (width ``d_var``);
   a GRN over all embeddings gives softmax weights per feature, a GRN per feature
   (batched as one einsum) transforms each, and their weighted sum is projected to
   ``d_model``. ``d_var < d_model`` keeps the (B, T, 16, d_var) tensors, which dominate
   the cost, small;
2. an **LSTM encoder**, then a gated skip connection (GLU, add, LayerNorm);
3. **static enrichment** (a GRN; without static covariates it has no context input);
4. **interpretable multi-head attention**: per-head queries and keys, one value
   projection shared by every head, head outputs averaged, so the mean attention matrix
   says which past bars a forecast used. A position attends to itself and the
   ``attn_window − 1`` positions before it;
5. a gated skip, a position-wise GRN, a final gate back to the LSTM features, and a
   linear head giving one value per quantile, trained with the pinball loss.

:meth:`TFT.step` is the streaming form: it carries the LSTM state and a ring buffer of
the last ``attn_window`` keys and values, so one new bar costs one step of each part
instead of recomputing the window. Fed the bars of a sequence one at a time from
:meth:`TFT.initial_state`, it gives what :meth:`TFT.forward` gives over that sequence
(the tests check it); that is also what the model is trained to do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from perfgate_pipeline import _kernels as kernels
from perfgate_pipeline import serve
from perfgate_pipeline.env import MarketData
from perfgate_pipeline.models.spec import ModelSpec
from perfgate_pipeline.train import SequenceTask, sequence_task

__all__ = ["SPEC", "TFT", "TFTConfig", "TFTServer", "TFTState", "attention_mask", "quantile_loss", "tft_tensors"]


@dataclass
class TFTConfig:
    n_features: int = 16  # observed inputs per bar
    d_model: int = 32  # width after variable selection
    d_var: int = 16  # per-variable embedding width
    n_heads: int = 4  # attention heads (queries and keys per head; values shared)
    attn_window: int = 64  # positions each forecast attends to, itself included
    quantiles: tuple[float, ...] = field(default=(0.1, 0.5, 0.9))  # predicted quantiles of the next return
    seq_len: int = 256  # training sequence length
    batch_size: int = 160  # sequences per training step; with seq_len, what puts training near 1.9 GB
    lr: float = 1e-3  # AdamW learning rate

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model = {self.d_model} must be a multiple of n_heads = {self.n_heads}")


#: Streaming state: LSTM (h, c) (B, d), keys (B, W, heads, d_head), values (B, W, d_head), bars seen.
TFTState = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]


class GLU(nn.Module):
    """a · σ(b) with [a, b] = W x + c: lets the network switch a path off."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_in, 2 * d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.proj(x).chunk(2, dim=-1)
        return a * torch.sigmoid(b)


class GRN(nn.Module):
    """Gated residual network: LayerNorm(skip(x) + GLU(W2 ELU(W1 x)))."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int) -> None:
        super().__init__()
        self.skip = nn.Linear(d_in, d_out) if d_in != d_out else nn.Identity()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.glu = GLU(d_hidden, d_out)
        self.norm = nn.LayerNorm(d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(F.elu(self.fc1(x)))
        return self.norm(self.skip(x) + self.glu(h))


class VariableGRNs(nn.Module):
    """One GRN per variable, d_var -> d_var, batched over variables: (V, N, d) -> (V, N, d).

    Variables lead so that every matmul is one ``baddbmm`` over contiguous memory, bias
    included; an einsum over (N, V, d) would copy to that layout and back at each layer.
    """

    def __init__(self, n_vars: int, d: int) -> None:
        super().__init__()
        scale = 1.0 / math.sqrt(d)
        self.w1 = nn.Parameter(torch.empty(n_vars, d, d).uniform_(-scale, scale))  # (V, in, out)
        self.b1 = nn.Parameter(torch.zeros(n_vars, 1, d))
        self.w2 = nn.Parameter(torch.empty(n_vars, d, d).uniform_(-scale, scale))
        self.b2 = nn.Parameter(torch.zeros(n_vars, 1, d))
        self.wg = nn.Parameter(torch.empty(n_vars, d, 2 * d).uniform_(-scale, scale))
        self.bg = nn.Parameter(torch.zeros(n_vars, 1, 2 * d))
        self.ln_w = nn.Parameter(torch.ones(n_vars, 1, d))
        self.ln_b = nn.Parameter(torch.zeros(n_vars, 1, d))

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        h = F.elu(torch.baddbmm(self.b1, e, self.w1))  # (V, N, d)
        h = torch.baddbmm(self.b2, h, self.w2)
        a, b = torch.baddbmm(self.bg, h, self.wg).chunk(2, dim=-1)
        y = e + a * torch.sigmoid(b)
        return F.layer_norm(y, y.shape[-1:]) * self.ln_w + self.ln_b


class VariableSelection(nn.Module):
    """x (…, 16) -> (…, d_model): embed each feature, weight them by a softmax, sum, project."""

    def __init__(self, config: TFTConfig) -> None:
        super().__init__()
        V, dv = config.n_features, config.d_var
        self.emb_w = nn.Parameter(torch.randn(V, 1, dv))
        self.emb_b = nn.Parameter(torch.zeros(V, 1, dv))
        self.select = GRN(V * dv, config.d_model, V)
        self.per_var = VariableGRNs(V, dv)
        self.out = nn.Linear(dv, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *lead, V = x.shape
        xv = x.reshape(-1, V).T  # (V, N)
        e = xv[..., None] * self.emb_w + self.emb_b  # (V, N, dv)
        flat = e.transpose(0, 1).reshape(xv.shape[1], -1)  # (N, V * dv), variable-major as the selection GRN reads it
        weights = torch.softmax(self.select(flat), dim=-1)  # (N, V)
        mixed = (weights.T[..., None] * self.per_var(e)).sum(0)  # (N, dv)
        return self.out(mixed).reshape(*lead, -1)


def attention_mask(T: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) bool, True where query i may attend to key j: i − window < j ≤ i."""
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    return (j <= i) & (j > i - window)


class InterpretableAttention(nn.Module):
    """Multi-head attention whose heads share one value projection and are averaged."""

    def __init__(self, config: TFTConfig) -> None:
        super().__init__()
        self.config = config
        d, dh = config.d_model, config.d_head
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, dh)
        self.out = nn.Linear(dh, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        B, T, _ = x.shape
        q = self.q(x).view(B, T, cfg.n_heads, cfg.d_head).transpose(1, 2).reshape(B * cfg.n_heads, T, cfg.d_head)
        k = self.k(x).view(B, T, cfg.n_heads, cfg.d_head).transpose(1, 2).reshape(B * cfg.n_heads, T, cfg.d_head)
        v = self.v(x)  # (B, T, dh)
        bias = torch.zeros(T, T, dtype=x.dtype, device=x.device)
        bias = bias.masked_fill(~attention_mask(T, cfg.attn_window, x.device), float("-inf"))
        # scale, matmul and mask in one op: each separate pass over (B·heads, T, T) costs as much as the matmul
        scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=1.0 / math.sqrt(cfg.d_head))
        attn = torch.softmax(scores, dim=-1)  # (B·heads, T, T)
        # mean over heads of A_h V, which is (mean_h A_h) V: averaging the small per-head outputs
        # instead of the (T, T) matrices keeps every backward kernel on contiguous memory
        v = v[:, None].expand(B, cfg.n_heads, T, cfg.d_head).reshape(B * cfg.n_heads, T, cfg.d_head)
        heads = torch.bmm(attn, v).view(B, cfg.n_heads, T, cfg.d_head)
        return self.out(heads.mean(dim=1))

    @torch.no_grad()
    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """The interpretable attention (B, T, T): row i, averaged over heads, says how much each bar counted."""
        cfg = self.config
        B, T, _ = x.shape
        q = self.q(x).view(B, T, cfg.n_heads, cfg.d_head).transpose(1, 2)
        k = self.k(x).view(B, T, cfg.n_heads, cfg.d_head).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(cfg.d_head)
        scores = scores.masked_fill(~attention_mask(T, cfg.attn_window, x.device), float("-inf"))
        return torch.softmax(scores, dim=-1).mean(dim=1)


class TFT(nn.Module):
    """features (B, T, 16) -> quantiles of the next return (B, T, n_quantiles); position t sees bars ≤ t."""

    def __init__(self, config: TFTConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.vsn = VariableSelection(config)
        self.lstm = nn.LSTM(d, d, batch_first=True)
        self.lstm_gate = GLU(d, d)
        self.lstm_norm = nn.LayerNorm(d)
        self.enrich = GRN(d, d, d)
        self.attn = InterpretableAttention(config)
        self.attn_gate = GLU(d, d)
        self.attn_norm = nn.LayerNorm(d)
        self.ff = GRN(d, d, d)
        self.out_gate = GLU(d, d)
        self.out_norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, len(config.quantiles))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.vsn(x)  # (B, T, d)
        h, _ = self.lstm(v)  # (B, T, d), from a zero state
        phi = self.lstm_norm(v + self.lstm_gate(h))
        theta = self.enrich(phi)
        delta = self.attn_norm(theta + self.attn_gate(self.attn(theta)))
        psi = self.ff(delta)
        return self.head(self.out_norm(phi + self.out_gate(psi)))

    def initial_state(self, batch: int = 1, device: torch.device | str | None = None) -> TFTState:
        cfg = self.config
        dev = device if device is not None else self.head.weight.device
        kw = {"device": dev, "dtype": self.head.weight.dtype}
        zeros = torch.zeros(batch, cfg.d_model, **kw)
        keys = torch.zeros(batch, cfg.attn_window, cfg.n_heads, cfg.d_head, **kw)
        values = torch.zeros(batch, cfg.attn_window, cfg.d_head, **kw)
        return zeros, zeros.clone(), keys, values, 0

    def step(self, x: torch.Tensor, state: TFTState) -> tuple[torch.Tensor, TFTState]:
        """One new bar x (B, 16) -> (its quantiles (B, n_quantiles), the state after it).

        The ring buffer slot ``seen % attn_window`` takes this bar's key and value; slots
        not yet written are masked out, so the first bars attend to what exists.
        """
        cfg = self.config
        h, c, keys, values, seen = state
        B = x.shape[0]
        v = self.vsn(x)  # (B, d)
        gates = (
            v @ self.lstm.weight_ih_l0.T + self.lstm.bias_ih_l0 + h @ self.lstm.weight_hh_l0.T + self.lstm.bias_hh_l0
        )
        i, f, g, o = gates.chunk(4, dim=-1)  # torch's gate order
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        phi = self.lstm_norm(v + self.lstm_gate(h))
        theta = self.enrich(phi)
        slot = seen % cfg.attn_window
        keys, values = keys.clone(), values.clone()  # the caller's state stays valid
        keys[:, slot] = self.attn.k(theta).view(B, cfg.n_heads, cfg.d_head)
        values[:, slot] = self.attn.v(theta)
        q = self.attn.q(theta).view(B, cfg.n_heads, 1, cfg.d_head)
        scores = (q @ keys.permute(0, 2, 3, 1)).squeeze(2) / math.sqrt(cfg.d_head)  # (B, heads, W)
        filled = min(seen + 1, cfg.attn_window)
        if filled < cfg.attn_window:
            scores[..., filled:] = float("-inf")
        attn = torch.softmax(scores, dim=-1).mean(dim=1)  # (B, W)
        a = self.attn.out((attn[:, None] @ values).squeeze(1))  # (B, d)
        delta = self.attn_norm(theta + self.attn_gate(a))
        psi = self.ff(delta)
        out = self.head(self.out_norm(phi + self.out_gate(psi)))
        return out, (h, c, keys, values, seen + 1)


def quantile_loss(pred: torch.Tensor, target: torch.Tensor, quantiles: tuple[float, ...]) -> torch.Tensor:
    """Pinball loss averaged over positions and quantiles: pred (…, Q), target (…)."""
    q = torch.tensor(quantiles, dtype=pred.dtype, device=pred.device)
    err = target[..., None] - pred  # (…, Q)
    return torch.maximum(q * err, (q - 1.0) * err).mean()


def _task(config: TFTConfig, data: MarketData, *, device: str = "cpu", seed: int = 0) -> SequenceTask:
    """Windows of the series; the target of a bar is the next return in units of the series'
    standard deviation, so quantiles are comparable across instruments."""
    torch.manual_seed(seed)
    r = data.returns
    scale = max(float(r.std()), 1e-12)
    quantiles = config.quantiles

    def target_fn(ret: np.ndarray) -> np.ndarray:
        return (ret / scale).astype(np.float32)

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return quantile_loss(out, y, quantiles)

    return sequence_task(TFT(config).to(device), data, config, target_fn=target_fn, loss_fn=loss_fn, seed=seed)


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
        self.w, self.off = serve.pack(tft_tensors(model))
        self.dims = np.array([cfg.n_features, cfg.d_var, cfg.d_model, cfg.n_heads, cfg.attn_window], dtype=np.int64)
        d, W = cfg.d_model, cfg.attn_window
        self.state = serve.zeros(2 * d + W * d + W * cfg.d_head)
        size = kernels.tft_scratch_size(cfg.n_features, cfg.d_var, d, cfg.n_heads, W)
        self.scratch = serve.zeros(size)
        self.out = serve.zeros(len(cfg.quantiles))
        self.seen = 0

    def reset(self) -> None:
        self.state[:] = 0.0
        self.seen = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        kernels.tft_step(x, self.w, self.off, self.dims, self.state, self.seen, self.scratch, self.out)
        self.seen += 1
        return self.out


def _server(model: TFT) -> TFTServer:
    return TFTServer(model)


SPEC = ModelSpec(
    name="tft",
    config=TFTConfig,
    model=TFT,
    task=_task,
    server=_server,
    kind="compute",
    uncounted=(
        "its training step is bound by memory bandwidth (moving its activations costs about a second natively), "
        "which instruction counts cannot see, and one call under valgrind takes minutes"
    ),
)
