"""Benchmarks that print the papers' tables: attacks × budgets, edited subsets with mR, and
training with augmentations (Gen4Seg Tab. IV)."""
