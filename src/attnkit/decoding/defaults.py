"""Every search option's default, said once: :class:`~.options.SearchOptions`' fields, and the keyword
defaults of the thin search functions (``beam_search``, ``greedy_search``, ...) and of validation."""

BEAM = 4  # hypotheses kept per sentence
NBEST = 1  # results per sentence
LENGTH_PENALTY = 0.6  # GNMT's alpha
MAX_LEN_A = 1.5  # at most A * source tokens + B output tokens, eos included
MAX_LEN_B = 10
TEMPERATURE = 1.0  # sampling: the logits divided by it
TOP_K = 0  # 0: no top-k limit
TOP_P = 1.0  # 1: no nucleus limit
