"""The benchmark harness: :mod:`.measure` runs inside step processes, the other modules in the
driver. Step processes import suite modules, which import the harness, so every module here
imports nothing but the standard library and pyarrow (and runs under pyarrow 19 and 26), and
importing this package imports none of them.
"""
