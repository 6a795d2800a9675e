"""The training objective: translation's (label-smoothed cross-entropy, teacher forcing), its
validation reporting BLEU on the reversed sequences."""

from attnkit.tasks.translation.training import TranslationTask


class ReverseTask(TranslationTask):
    """Translation's training, over pairs whose target is the source reversed."""
