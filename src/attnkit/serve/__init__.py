"""Serving: a JSON API for translation and attention, dynamic batching, and the attention page.

Needs the ``serve`` extra (FastAPI, uvicorn): ``pip install 'attnkit[serve]'``.
"""
