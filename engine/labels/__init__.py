"""The label bank's data: one JSON file per sensitivity tier (SPEC §2).

``public.json``, ``neutral.json`` and ``sensitive.json`` each hold
``{"tier": "...", "labels": ["...", ...]}``.  The labels were written for this project
(not taken from the authors' bank).  Load them with :func:`engine.labelbank.load_bank`.
"""
