"""The package's one compiled part (everything else is in pyproject.toml): the harvest's
per-page loop, conceptual/harvest/_links.c. scripts/setup.sh builds it in place."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "conceptual.harvest._links",
            ["platform/conceptual/harvest/_links.c"],
            libraries=["crypto"],  # OpenSSL's SHA-1 (libssl-dev)
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
        )
    ]
)
