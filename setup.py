"""Package discovery under mapped folder names (pyproject.toml holds everything else).

``eval/`` installs as ``memofs_eval`` and ``datasets/`` as ``memofs_datasets``; setuptools'
automatic discovery cannot see through that mapping, so subpackages are listed here.
"""

from setuptools import find_packages, setup


def _mapped(folder: str, name: str) -> list[str]:
    return [name] + [f"{name}.{p}" for p in find_packages(folder)]


setup(
    packages=find_packages(include=["memofs", "memofs.*"])
    + _mapped("eval", "memofs_eval")
    + _mapped("datasets", "memofs_datasets"),
)
