"""Surfaces: what users and agents touch: the CLI, the MCP server and generated agent files.

They are the entry points of the processes memofs starts, so numpy's load-time environment
(:mod:`memofs.signals.numpy_environment`) is set here, before any of them imports numpy; a
program that only imports the library keeps its own environment.
"""

from memofs.signals import numpy_environment as _numpy_environment

_numpy_environment.apply()
