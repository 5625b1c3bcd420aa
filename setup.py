"""The wheel's packages, found rather than listed: every package of the library under src/, and
the command line in stages/ installed under the library as zrodlo.stages (pyproject.toml maps
both folders and holds everything else)."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages("src"),
        "zrodlo.stages",
        *(f"zrodlo.stages.{name}" for name in find_packages("stages")),
    ]
)
