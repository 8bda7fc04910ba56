"""Maps the design's top-level folders onto namespaced import names.

`harness/` installs as `draguard.harness`, `chaos/` as `draguard.chaos`, and so on; `scenarios/`
ships as package data (`draguard.scenarios`) so that the demo and the library work from a wheel.
Everything else about the project lives in pyproject.toml.
"""

from setuptools import find_packages, setup

FOLDERS = ("cli", "harness", "chaos", "conformance", "reports", "scenarios")

packages: list[str] = []
for folder in FOLDERS:
    packages += ["draguard." + name for name in find_packages(where=".", include=[folder, folder + ".*"])]

setup(packages=packages, package_dir={"draguard." + folder: folder for folder in FOLDERS})
