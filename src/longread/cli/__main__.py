"""``python -m longread.cli``: the same as the ``longread`` command."""

from .main import main

main()
