"""The loop as a LangGraph graph: its nodes (generate, evaluate, review, finalize), the
adapters and steps they call through, selection, the run drivers and tracing.
"""
