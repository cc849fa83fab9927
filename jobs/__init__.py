"""Jobs: the work behind the CLI commands (attack, predict, edit, train) and the executors that
run benchmark shards."""
