"""attnkit: attention and the Transformer of "Attention Is All You Need", for sequence-to-sequence work."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attnkit")  # pyproject.toml's, as installed: the one place it is written
except PackageNotFoundError:  # the source tree on sys.path, not installed
    __version__ = "0.0.0+unknown"
