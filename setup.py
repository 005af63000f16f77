"""What pyproject.toml cannot say by itself: the package list, read from the tree (every
folder with an __init__.py below the package folders, so a new package, a family's folder
say, needs no line anywhere), and the package's one compiled
part, the harvest's per-page loop, conceptual/harvest/_links.c. scripts/setup.sh builds it
in place."""

from pathlib import Path

from setuptools import Extension, setup

# The root package lives in platform/conceptual/ because a top-level `platform` package would
# shadow the standard library's `platform` module (docs/design.md). The demo (make demo: its
# corpus, photos and image server) is a package of its own, demo/.
PACKAGE_DIRS = {
    "conceptual": "platform/conceptual",
    "conceptual.pipelines": "pipelines",
    "conceptual.jobs": "jobs",
    "conceptual.serve": "serve",
    "conceptual_demo": "demo",
}


def packages(repo: Path = Path(".")) -> list[str]:
    return sorted(
        ".".join((name, *init.parent.relative_to(repo / root).parts))
        for name, root in PACKAGE_DIRS.items()
        for init in (repo / root).rglob("__init__.py")
    )


# setuptools runs this file as __main__; the tests import it for packages().
if __name__ == "__main__":
    setup(
        package_dir=PACKAGE_DIRS,
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
