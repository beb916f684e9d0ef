"""The packages of the ``vectide`` import name, which setup.cfg maps to the repo's root:
services/ and streaming/ (and their subpackages) plus schemas/ (data, no __init__.py)."""

from setuptools import find_namespace_packages, setup

PACKAGES = find_namespace_packages(include=["services", "services.*", "streaming", "streaming.*"])

setup(packages=[f"vectide.{name}" for name in [*PACKAGES, "schemas"]])
