"""The files of a bus and their arithmetic, in pure Python (mirrored in Java, bound by tests).

``layout`` (every wire layout, drawn, with its named offsets), ``busmeta`` (``bus.meta``),
``files`` (opening a bus's files safely), ``commitlog`` (the Spark sink's commit log),
``positions`` (positions across a rolling bus's segments). Imports only ``mappedbus_py.errors``.
"""
