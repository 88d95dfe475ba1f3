"""`python -m langgraph_refine`: the `langgraph-refine` command line (as MCP hosts start it)."""

import sys

from langgraph_refine.cli import main

sys.exit(main())
