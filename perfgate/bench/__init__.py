"""Measurement: timers, the stage registry, the runner and the machine fingerprint."""

from perfgate.bench.registry import Stage, StageContext, register, stage, stages_for

__all__ = ["Stage", "StageContext", "register", "stage", "stages_for"]
