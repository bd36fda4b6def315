"""Tuning: knobs and templates are in tdsl.schedule; here are the auto-scheduler, the
measured tuner, its log and the trial runner its executors run."""

from ..schedule.schedule import set_log_reader
from .auto import autoschedule, autotemplate
from .explore import Explorer, explore
from .log import schedule_from_log
from .machine import Machine
from .tuner import TuneResult, tune

set_log_reader(schedule_from_log)

__all__ = ["Explorer", "Machine", "TuneResult", "explore", "autoschedule", "autotemplate", "schedule_from_log", "tune"]
