# cython: language_level=3
"""No-op C functions for the Python floor (workers.py floor): the shape of a bus call, and no
work. Built on first use by pyximport into build/perf-pyx."""


def noop3(a=None, b=None, c=None):
    """Three arguments, as ``write_fields(source, price, quantity)`` takes them."""
    return True
