"""The memofs evaluation harness (installed as ``memofs_eval`` from ``eval/``).

Every harness module is a program's entry point (``memofs-eval``, ``python -m memofs_eval...``),
so the harness sets numpy's load-time environment as the CLI does, before numpy loads: it
measures the library as the CLI runs it. ``memofs_eval._env`` adds the harness's own settings.
"""

from memofs.signals import numpy_environment as _numpy_environment

_numpy_environment.apply()
