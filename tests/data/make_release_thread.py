"""Writes release_thread.sqlite: threads as version 0.1.0 stored them (models in checkpoints).

Kept to show how the fixture was made; run with the 0.1.0 release installed:
`python tests/data/make_release_thread.py tests/data/release_thread.sqlite`.
"""

import sys

from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_refine import create_refine_graph

SCORES = [0.4, 0.7, 0.6]


def generate(state):
    return f"draft {len(state['attempts'])}"


def evaluate(response, state):
    return SCORES[len(state["attempts"])]


with SqliteSaver.from_conn_string(sys.argv[1]) as saver:
    done = create_refine_graph(generate, evaluate, max_iterations=2, patience=None)
    done.compile(checkpointer=saver).invoke(
        {"task": "Write a tagline."}, {"configurable": {"thread_id": "finished"}}
    )
    reviewed = create_refine_graph(
        generate, evaluate, max_iterations=2, patience=None, human_review="final"
    )
    reviewed.compile(checkpointer=saver).invoke(
        {"task": "Write a tagline."}, {"configurable": {"thread_id": "paused"}}
    )
