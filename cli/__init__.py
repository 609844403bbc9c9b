"""The ``sandbox`` command line: a thin typer layer over the ``sandbox`` library."""
