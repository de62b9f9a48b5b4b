"""longread: answer questions about documents far longer than a language model's window."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("longread")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
