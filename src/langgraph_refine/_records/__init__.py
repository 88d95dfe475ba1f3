"""The strategy record: what explore and the ladder learn across runs, kept in a LangGraph store."""
