"""The session: the object a run that uses the plugin registers, built from parts
with one job each (:mod:`.core` composes them), the hooks users implement
(:mod:`.hookspecs`) and what keeps the plugin inert until a run uses it
(:mod:`.inert`).

This package's own import is light: ``plugin.py`` imports :mod:`.hookspecs`
and :mod:`.inert` in every pytest run, and the session's parts load only when
a run uses the plugin.
"""
