"""Packaging shim: the repository keeps `shared/` and `services/` at its top level, and they
install as `footfall.shared`, `footfall.services` and `footfall.testing` (one namespace, so installing Footfall
into an application's environment cannot clash with its own `shared` or `services`).
pyproject.toml holds everything else; only the folder → package mapping and the one Rust
extension (the `/import` fast path, `shared/events/fastpath`) need code.

The extension is optional: where no Rust toolchain is found, Footfall installs without it and
every request takes the Python path (the same answers, slower). `make test` in CI requires it."""

from setuptools import find_packages, setup
from setuptools_rust import Binding, RustExtension

FOLDERS = ("shared", "services", "testing")
# Data folders (no Python in them): listed so that setuptools ships them without a warning.
DATA_FOLDERS = ("services.ui.static", "shared.openapi.specs")

setup(
    package_dir={f"footfall.{folder}": folder for folder in FOLDERS},
    packages=[f"footfall.{name}" for name in (*find_packages(include=[f"{f}*" for f in FOLDERS]), *DATA_FOLDERS)],
    rust_extensions=[
        RustExtension(
            "footfall.shared.events._fastpath",
            path="shared/events/fastpath/Cargo.toml",
            binding=Binding.PyO3,
            optional=True,
            debug=False,  # editable installs (`make`) too: the debug build is many times slower
        )
    ],
)
