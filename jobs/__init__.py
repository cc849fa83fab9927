"""Jobs: the work behind the CLI commands (training; more move here with the core split)."""
