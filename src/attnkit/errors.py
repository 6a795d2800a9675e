"""User-facing errors: the CLI prints their message on one line and exits with code 2.

Anything a user can get wrong (a config value, a data file, a checkpoint) raises one of these with a
message that names the culprit; everything else is a bug and keeps its traceback.
"""


class AttnkitError(Exception):
    """Base class of every error caused by user input rather than by a bug."""


class ConfigError(AttnkitError, ValueError):
    """An unknown config key or an invalid value; the message names the field."""


class DataError(AttnkitError, ValueError):
    """Unreadable, missing or inconsistent data; the message names the file (and line)."""


class CheckpointError(AttnkitError, ValueError):
    """A corrupt, missing or incompatible checkpoint."""
