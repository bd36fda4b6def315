"""The optional packages chunked execution uses, imported when first needed."""

from __future__ import annotations

import importlib

from ..errors import MissingDependency

# the pip extra of tdsl that installs each package
EXTRAS = {"dask": "chunked", "distributed": "dask", "xarray": "xarray", "zarr": "chunked"}


def require(module: str, package: str):
    """`module` imported, or MissingDependency naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = EXTRAS.get(package, package)
        raise MissingDependency(
            f"{module} is not installed; chunked execution needs it: pip install "
            f"'tdsl[{extra}]' (or pip install {package})") from None
