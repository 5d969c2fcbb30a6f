"""The ``repro`` command: typer wiring only, one module per command group."""
