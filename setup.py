"""Maps the repository's top-level folders to subpackages of the one ``roofcast`` package.

``graph_import/`` installs as ``roofcast.graph_import`` and so on, so nothing but ``roofcast``
lands in site-packages (metadata stays in pyproject.toml). The package list is found here, not
written out, so a new subfolder cannot be left out of a wheel.
"""

from setuptools import find_namespace_packages, setup

SUBPACKAGES = ("graph_import", "hw_catalog", "predictor", "training_data", "app")


def _packages() -> tuple[list[str], dict[str, str]]:
    packages, package_dir = ["roofcast"], {"roofcast": "roofcast"}
    for top in SUBPACKAGES:
        package_dir[f"roofcast.{top}"] = top
        found = find_namespace_packages(include=[top, f"{top}.*"], exclude=["*.__pycache__"])
        packages += [f"roofcast.{name}" for name in found]
    return packages, package_dir


PACKAGES, PACKAGE_DIR = _packages()
setup(packages=PACKAGES, package_dir=PACKAGE_DIR)
