"""What pyproject.toml cannot say by itself: the package list, read from the tree (every
folder with an __init__.py below the roots pyproject.toml's package-dir maps, so a new
package, a family's folder say, needs no line anywhere), and the package's one compiled
part, the harvest's per-page loop, conceptual/harvest/_links.c. scripts/setup.sh builds it
in place."""

import tomllib
from pathlib import Path

from setuptools import Extension, setup


def package_dirs(repo: Path = Path(".")) -> dict[str, str]:
    """pyproject.toml's package-dir: each root package's folder."""
    project = tomllib.loads((repo / "pyproject.toml").read_text())
    return project["tool"]["setuptools"]["package-dir"]


def packages(repo: Path = Path(".")) -> list[str]:
    return sorted(
        ".".join((name, *init.parent.relative_to(repo / root).parts))
        for name, root in package_dirs(repo).items()
        for init in (repo / root).rglob("__init__.py")
    )


# setuptools runs this file as __main__; the tests import it for packages().
if __name__ == "__main__":
    setup(
        packages=packages(),
        ext_modules=[
            Extension(
                "conceptual.harvest._links",
                ["platform/conceptual/harvest/_links.c"],
                libraries=["crypto"],  # OpenSSL's SHA-1 (libssl-dev)
                extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
            )
        ],
    )
