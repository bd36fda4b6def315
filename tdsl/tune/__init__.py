"""Tuning: knobs and templates are in tdsl.schedule; here are the auto-scheduler, the
measured tuner, its log and the trial runner its executors run."""

from .auto import autoschedule, autotemplate
from .log import schedule_from_log
from .tuner import TuneResult, tune

__all__ = ["TuneResult", "autoschedule", "autotemplate", "schedule_from_log", "tune"]
