"""A Hugging Face Hub model id (``Helsinki-NLP/opus-mt-de-en``) as a local folder: the Hub's cache
when it holds the model (no network needed), else a download where the machine is online; where it
is not, one line saying how to fetch the folder elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ConfigError

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
MARIAN_FILES = ["config.json", "*.safetensors", "*.spm", "*vocab*.json", "tokenizer_config.json"]


def model_folder(source: str | Path) -> Path:
    """``source`` itself when it is a folder; a Hub id's snapshot otherwise."""
    path = Path(source)
    if path.is_dir() or not HUB_ID.fullmatch(str(source)):
        return path  # a folder, or a path that is not one: the importer says so
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ConfigError(
            f"{source} is not a folder here; a Hugging Face Hub id needs huggingface_hub "
            "(pip install 'attnkit[hf]')"
        ) from None
    try:  # the cache first: it works offline
        return Path(snapshot_download(str(source), allow_patterns=MARIAN_FILES, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached: ask the Hub
        pass
    try:
        return Path(snapshot_download(str(source), allow_patterns=MARIAN_FILES))
    except Exception as e:  # noqa: BLE001 - offline, unknown id, gated: one line
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise ConfigError(
            f"{source} is not a folder here and the Hugging Face Hub did not give it ({reason}); where "
            f"the machine is online: huggingface-cli download {source} --local-dir DIR, then import DIR"
        ) from None
