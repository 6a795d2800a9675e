"""attnkit: attention and the Transformer of "Attention Is All You Need", for sequence-to-sequence work."""

__version__ = "0.1.0"
