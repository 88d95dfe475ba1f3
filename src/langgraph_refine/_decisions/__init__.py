"""The loop's decisions, without I/O: the round, the strategy, the ladder, memory, edits,
prompts, and the options they decide with.
"""
