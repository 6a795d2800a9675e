"""The built-in tasks, each a package registered through the plugin interface
(:mod:`attnkit.plugin`), as a plugin outside attnkit registers:

- :mod:`.translation` ("translate"): ``transformer`` and ``rnn`` models;
- :mod:`.language_model` ("generate"): ``lm``;
- :mod:`.classification` ("classify"): ``classifier``;
- :mod:`.captioning` ("caption"): ``captioner``.

Nothing outside a task's package imports it: the core finds it through the registry.
"""
