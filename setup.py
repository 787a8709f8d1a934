"""Packaging shim: the repository keeps `shared/` and `services/` at its top level, and they
install as `footfall.shared`, `footfall.services` and `footfall.testing` (one namespace, so installing Footfall
into an application's environment cannot clash with its own `shared` or `services`).
pyproject.toml holds everything else; only the folder → package mapping needs code."""

from setuptools import find_packages, setup

FOLDERS = ("shared", "services", "testing")
# Data folders (no Python in them): listed so that setuptools ships them without a warning.
DATA_FOLDERS = ("services.ui.static", "shared.openapi.specs")

setup(
    package_dir={f"footfall.{folder}": folder for folder in FOLDERS},
    packages=[f"footfall.{name}" for name in (*find_packages(include=[f"{f}*" for f in FOLDERS]), *DATA_FOLDERS)],
)
