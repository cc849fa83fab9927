"""The Click commands behind cli.py, one module per command or group; they parse options, call
the jobs and benchmarks, and print."""
