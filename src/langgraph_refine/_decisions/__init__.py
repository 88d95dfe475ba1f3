"""The loop's decisions, without I/O: the round, strategy, ladder, memory, edits, options."""
