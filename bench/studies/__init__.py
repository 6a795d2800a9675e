"""Study drivers: the runs behind the recipe tables of docs/BENCHMARKS.md.

``python -m bench.studies.recipe_study`` trains one change at a time at a fixed budget;
``python -m bench.studies.decode_study`` scores the decoding choices of one finished run.
"""
