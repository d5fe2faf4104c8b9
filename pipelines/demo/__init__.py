"""The demo: one user of the integration (``make demo``), its tables declared in ``defs/``."""
