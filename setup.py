"""Maps the design's top-level folders onto namespaced import names.

`harness/` installs as `draguard.harness`, `chaos/` as `draguard.chaos`, and so on; `scenarios/`
ships as package data (`draguard.scenarios`) so that the demo and the library work from a wheel.
Data folders (``proto/``, ``gomod/``) are namespace packages, so setuptools ships them as packages
rather than warning that they would be ignored. Everything else about the project lives in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

FOLDERS = ("cli", "harness", "chaos", "conformance", "reports", "scenarios")

packages: list[str] = []
for folder in FOLDERS:
    packages += ["draguard." + name for name in find_namespace_packages(where=".", include=[folder, folder + ".*"], exclude=["*.__pycache__"])]

setup(packages=packages, package_dir={"draguard." + folder: folder for folder in FOLDERS})
