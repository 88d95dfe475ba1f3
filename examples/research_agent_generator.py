"""The research agent of `research_agent_middleware.py` as the generator of a refine graph.

Here the refine loop drives the agent, rather than the agent driving the loop: each round
gives the agent (a compiled `create_agent` graph, with its `lookup` tool) the task or the
refinement prompt as its human message, and its last AI message is the round's attempt.
`contains_all` checks the facts; the budget counts the model calls made inside the agent.

Run: `python examples/research_agent_generator.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel

from langgraph_refine import Budget, RefineResult, refine
from langgraph_refine.evaluators import contains_all

try:
    from examples.research_agent_middleware import REQUIRED, TASK, lookup
except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
    from research_agent_middleware import REQUIRED, TASK, lookup  # type: ignore[no-redef]


def main(model: BaseChatModel | None = None) -> RefineResult:
    """Refine the agent's answer until it holds the required facts; print the result."""
    try:
        from examples._common import default_model, show
    except ModuleNotFoundError:
        from _common import default_model, show  # type: ignore[no-redef,import-not-found]

    agent = create_agent(
        model or default_model(),
        tools=[lookup],
        system_prompt="You are a careful research assistant. Answer with facts only.",
    )
    result = refine(
        agent,
        TASK,
        contains_all(REQUIRED),
        target_score=1.0,
        max_iterations=2,
        budget=Budget(max_calls=12),  # the agent's own model calls count
    )
    show(result)
    return result


if __name__ == "__main__":
    main()
