"""Kernels: argument checking, the native call, benchmarking and display."""

from .kernel import Kernel, Timing
from .threads import num_threads, set_num_threads, threads

__all__ = ["Kernel", "Timing", "num_threads", "set_num_threads", "threads"]
