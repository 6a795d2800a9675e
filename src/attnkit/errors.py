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


class Stopped(Exception):
    """Training stopped by a signal after saving what it had; not a user error.

    The CLI prints the message (where it stopped, how to resume) on one line and exits with
    ``exit_code``: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as shells report it.
    An empty message (a torchrun rank other than 0) prints nothing.
    """

    def __init__(self, message: str, *, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code
