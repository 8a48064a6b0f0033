"""Adapters between ragbridge's core and the outside world.

Each submodule wraps exactly one optional dependency family and imports it lazily, so importing
this package never pulls in a framework.
"""
