"""`python -m langgraph_refine.cli`: the same as the `langgraph-refine` console script."""

import sys

from langgraph_refine.cli import main

sys.exit(main())
