"""Run storage: run folders (whole-line appends, resume, the lock, run.json) and provenance.

Used by segtk's jobs, benchmarks, commands and reports; not part of the plugin API (`segtk.core`).
"""
