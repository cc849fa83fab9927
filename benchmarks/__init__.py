"""Benchmarks that print the papers' tables (augmentation: Gen4Seg Tab. IV)."""
