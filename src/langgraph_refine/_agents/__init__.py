"""The loop inside a LangChain agent: `RefineMiddleware` and its state."""
