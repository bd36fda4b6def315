"""Kernels: argument checking, the native call, benchmarking and display."""

from .kernel import Kernel, Timing

__all__ = ["Kernel", "Timing"]
