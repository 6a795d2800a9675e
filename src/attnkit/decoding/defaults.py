"""Every search option's default, range and meaning, said once: :class:`~.options.SearchOptions`'
fields, the keyword defaults of the thin search functions (``beam_search``, ``greedy_search``, ...)
and of validation, the command line's flags and the HTTP schema. No torch: ``attnkit CMD --help``
reads them without loading it."""

from ..bounds import Bound

BEAM = 4  # hypotheses kept per sentence
NBEST = 1  # results per sentence
LENGTH_PENALTY = 0.6  # GNMT's alpha
MAX_LEN_A = 1.5  # at most A * source tokens + B output tokens, eos included
MAX_LEN_B = 10
TEMPERATURE = 1.0  # sampling: the logits divided by it
TOP_K = 0  # 0: no top-k limit
TOP_P = 1.0  # 1: no nucleus limit

# Within what torch.Generator.manual_seed accepts (-2**63 to 2**64 - 1), the integers a JSON number
# and a JavaScript client hold exactly: the HTTP schema states the same bounds the server takes.
SEED_RANGE = (-(2**53), 2**53)

MAX_BEAM = 256  # a beam's rows and candidates are allocated at once


# The one declaration of every numeric option's range: SearchOptions checks it, the HTTP schema
# states it (attnkit.plugin.http), and the command line's errors quote it.
BOUNDS = {
    "beam": Bound(int, 1, MAX_BEAM),
    "nbest": Bound(int, 1, 1000),
    "length_penalty": Bound(float, 0.0, 10.0),
    "max_len_a": Bound(float, 0.0, 1000.0),
    "max_len_b": Bound(int, 0, 100_000),
    "min_length": Bound(int, 0, 100_000),
    "no_repeat_ngram_size": Bound(int, 0, 1000),
    "repetition_penalty": Bound(float, 0.01, 100.0),
    "temperature": Bound(float, 0.0, 100.0, open_low=True),
    "top_k": Bound(int, 0, 1_000_000),
    "top_p": Bound(float, 0.0, 1.0, open_low=True),
    "seed": Bound(int, SEED_RANGE[0], SEED_RANGE[1]),
}


# What each option means, said once: the command line's help and the HTTP schema's descriptions.
HELP = {
    "beam": "beam size; 1 = greedy",
    "nbest": "results per input: a search's best first (at most --beam), or N samples with --sample",
    "length_penalty": "GNMT length penalty alpha (0 = off)",
    "max_len_a": "output tokens at most A * input tokens + B, eos included, within the model's "
    "positions (input tokens: a source's or a prompt's pieces; an image has none)",
    "max_len_b": "B of --max-len-a",
    "min_length": "tokens before eos may end an output",
    "no_repeat_ngram_size": "never repeat an n-gram of N tokens (0 = off)",
    "repetition_penalty": "CTRL penalty on tokens already produced, > 1 discourages them (1 = off)",
    "sample": "sample instead of searching (--temperature, --top-k, --top-p, --seed shape the draws)",
    "temperature": "sampling temperature",
    "top_k": "sample among the K most probable tokens (0 = all)",
    "top_p": "sample from the nucleus of mass P (1 = all)",
    "seed": "seed of the sampler: the same seed gives the same samples",
}
