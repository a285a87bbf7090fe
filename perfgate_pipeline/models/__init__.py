"""The models of the reference pipeline, one file each (nanoGPT style), and their registry.

Each model module has a ``@dataclass`` config with commented defaults and small
``nn.Module`` blocks whose ``forward`` only computes; the losses, the training task and the
fast single-sample server sit next to the model they belong to, built on the generic parts
that every model shares: the training loop and sequence tasks of
:mod:`perfgate_pipeline.train`, the serving buffers and servers of
:mod:`perfgate_pipeline.serve`. Those two know no model: the model modules import them,
never the other way round. A module ends with a :class:`ModelSpec` named ``SPEC``: what the
rest of the pipeline needs to know about its model. Everything that handles models by name
or by instance reads this registry: :func:`build_task` and :func:`default_config`,
:func:`fast_server`, the training stages, :func:`perfgate_pipeline.stages.load_checkpoint`
and ``perfgate bench --model``.

Adding a model takes its file (ending in ``SPEC``) and one :func:`register` line below.
The registry itself imports nothing heavy: a registered module is imported the first time
its spec is asked for, so the command line can list the names without importing torch.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

from perfgate_pipeline.models.spec import ModelSpec

if TYPE_CHECKING:  # annotations only: the registry imports nothing heavy
    from perfgate_pipeline.env import MarketData
    from perfgate_pipeline.serve import Server
    from perfgate_pipeline.train import Task

__all__ = [
    "MODELS",
    "ModelSpec",
    "build_task",
    "default_config",
    "fast_server",
    "on_register",
    "register",
    "spec",
    "spec_of",
    "unregister",
]


# name -> the spec, or the module whose SPEC it is (imported on first use)
_REGISTRY: dict[str, ModelSpec | str] = {}
_LISTENERS: list[Callable[[str], None]] = []


def register(name: str, spec_or_module: ModelSpec | str) -> None:
    """Add model ``name``: a :class:`ModelSpec`, or the dotted name of a module that defines
    one as ``SPEC`` (imported when first needed). A model of the same name is replaced."""
    if isinstance(spec_or_module, ModelSpec) and spec_or_module.name != name:
        raise ValueError(f"registered as {name!r}, but the spec is named {spec_or_module.name!r}")
    if not re.fullmatch(r"[a-z0-9]+", name):
        raise ValueError(f"model name must be lower-case letters and digits, got {name!r}")
    _REGISTRY[name] = spec_or_module
    for listener in list(_LISTENERS):
        listener(name)


def unregister(name: str) -> None:
    """Forget model ``name`` (for tests); what was registered for it elsewhere stays."""
    _REGISTRY.pop(name, None)


def on_register(listener: Callable[[str], None]) -> None:
    """Call ``listener(name)`` for every model registered now and every one registered later."""
    _LISTENERS.append(listener)
    for name in list(_REGISTRY):
        listener(name)


def spec(name: str) -> ModelSpec:
    """The spec of model ``name``; a ValueError naming the registered ones when there is none."""
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(_REGISTRY)}")
    if isinstance(entry, str):
        loaded = importlib.import_module(entry).SPEC
        if not isinstance(loaded, ModelSpec) or loaded.name != name:
            raise ValueError(f"{entry}.SPEC is not the ModelSpec of {name!r}")
        _REGISTRY[name] = entry = loaded
    return entry


def spec_of(model: object) -> ModelSpec:
    """The spec whose model class ``model`` is an instance of; a TypeError when none is."""
    for name in list(_REGISTRY):
        found = spec(name)
        if isinstance(model, found.model):
            return found
    raise TypeError(f"{type(model).__name__} is not a registered model ({', '.join(_REGISTRY)})")


def default_config(name: str) -> Any:
    """The benchmark's config of model ``name`` (the dataclass defaults)."""
    return spec(name).config()


def build_task(name: str, data: MarketData, *, config: Any = None, device: str = "cpu", seed: int = 0) -> Task:
    """The training task of model ``name`` on ``data`` (the config's defaults unless one is given).

    What the task is comes from the model's :class:`ModelSpec`: for the sequence models the
    targets are built from ``data.returns`` (Mamba-2 classifies the next return into terciles
    of the series' returns; the TFT predicts it in units of its standard deviation, so
    quantiles are comparable across instruments).
    """
    found = spec(name)
    cfg = config if config is not None else found.config()
    task: Task = found.task(cfg, data, device=device, seed=seed)
    return task


def fast_server(model: object) -> Server:
    """The fused numba server of a trained model (weights copied: later training does not change
    it), as its :class:`ModelSpec` makes it."""
    try:
        found = spec_of(model)
    except TypeError:
        raise TypeError(f"no fast server for {type(model).__name__}") from None
    server: Server = found.server(model)
    return server


class _Names(Sequence[str]):
    """The registered names, in registration order (the order ``--model all`` runs them);
    a live view, so a model registered later is in it too."""

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return tuple(_REGISTRY)[index]

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_REGISTRY))

    def __contains__(self, name: object) -> bool:
        return name in _REGISTRY

    def __repr__(self) -> str:
        return repr(tuple(_REGISTRY))


#: The model names ``perfgate bench --model`` accepts, in the order ``all`` runs them.
MODELS: Sequence[str] = _Names()

register("dqn", "perfgate_pipeline.models.dqn")
register("ppo", "perfgate_pipeline.models.ppo")
register("mamba2", "perfgate_pipeline.models.mamba2")
register("tft", "perfgate_pipeline.models.tft")
