"""Measurement: the stage registry, the runner, peak memory, machine fingerprint, git provenance."""

from perfgate.bench.registry import Stage, StageContext, register, stage, stages_for, unmeasured

__all__ = ["Stage", "StageContext", "register", "stage", "stages_for", "unmeasured"]
