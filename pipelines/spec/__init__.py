"""A table as a user declares it: the spec dataclasses (the YAML schema too) and their validation.

Everything else in ``pipelines`` is built from a :class:`~pipelines.spec.declaration.PaimonTableSpec`
(users import it from ``pipelines``); nothing here reads or writes a table.
"""
