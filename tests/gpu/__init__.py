"""The GPU test suite (``tests/gpu``): real CUDA, no mocks; skipped with the reason without a GPU.

A package, so that its ``conftest.py`` imports as ``gpu.conftest`` and leaves the root
``conftest`` module (which the CPU tests import from) alone.
"""
