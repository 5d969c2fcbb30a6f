"""gpu-repro: reproduce known GPU performance cliffs and leave evidence a maintainer can act on."""

__version__ = "0.1.0"
