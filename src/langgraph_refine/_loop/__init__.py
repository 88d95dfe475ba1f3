"""The loop as a LangGraph graph: its nodes, the adapters and steps they call through, drivers."""
