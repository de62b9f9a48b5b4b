"""``python -m longread``: the same as the ``longread`` command."""

from .cli.main import main

main()
