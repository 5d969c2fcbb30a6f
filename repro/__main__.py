"""``python -m repro``: the same CLI as the ``repro`` console script."""

from repro.cli.main import main

main()
