"""Structured extraction: refine a pydantic object, not a string.

`output_schema=Book` asks the model for a `Book` through the provider's structured
output (on llama.cpp, a grammar built from the JSON schema), so every reply is read and
validated as a `Book`: a reply that is not valid JSON, or breaks a constraint the grammar
cannot enforce (the year's range), is an attempt scored FAIL with the validation errors
as feedback, and the next round is shown those errors. Valid objects go to a field
check that reads the typed `Book` directly (its first parameter is annotated `Book`),
comparing each field with the paragraph.

Run: `python examples/structured_extraction.py` (see examples/_common.py for the model).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from langgraph_refine import Evaluation, RefineResult, refine

try:
    from examples._common import default_model, show
except ModuleNotFoundError:  # run as a script: examples/ itself is on sys.path
    from _common import default_model, show  # type: ignore[no-redef,import-not-found]


class Book(BaseModel):
    """The record to fill from the paragraph."""

    title: str = Field(description="the book's title")
    author: str = Field(description="the author's full name")
    year: int = Field(ge=1450, le=2100, description="the year it was first published")
    pages: int = Field(gt=0, description="the number of pages")


PARAGRAPH = (
    "Frankenstein is a novel by Mary Shelley. It was first published in 1818 in London, "
    "and the first edition ran to 280 pages."
)
EXPECTED = {"title": "Frankenstein", "author": "Mary Shelley", "year": 1818, "pages": 280}

TASK = f"Fill in the book record from this paragraph.\n\nParagraph: {PARAGRAPH}"


def fields(book: Book, state: Mapping[str, Any]) -> Evaluation:
    """Score the fraction of fields that match the paragraph (gets the typed `Book`)."""
    wrong = {key: value for key, value in EXPECTED.items() if getattr(book, key) != value}
    if not wrong:
        return Evaluation(score=1.0, feedback="Every field matches the paragraph.")
    hints = "; ".join(f"{key} is {value!r} in the paragraph" for key, value in wrong.items())
    return Evaluation(
        score=1 - len(wrong) / len(EXPECTED),
        feedback=f"These fields do not match the paragraph: {hints}.",
        details={"wrong": sorted(wrong)},
    )


def main(model: BaseChatModel | None = None) -> RefineResult:
    """Refine the record until every field matches; print and return the result."""
    result = refine(
        model or default_model(),
        TASK,
        fields,
        output_schema=Book,
        target_score=1.0,
        max_iterations=3,
        patience=None,
    )
    show(result)
    print(f"\nas a Book: {result.output!r}")
    return result


if __name__ == "__main__":
    main()
