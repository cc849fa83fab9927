"""Click commands behind cli.py (train, bench augment)."""
