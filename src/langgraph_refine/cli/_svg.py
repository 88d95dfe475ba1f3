"""What the HTML pages' plots share (the batch report's scores, a calibration's false PASSes)."""

from __future__ import annotations


def svg_start(element_id: str, label: str, width: int, height: int) -> list[str]:
    """A plot's opening: the `<svg>` element (its id, size and spoken label), a white ground.

    Example:
        >>> svg_start("p", "scores", 4, 2)[1]
        '<rect x="0" y="0" width="4" height="2" fill="#ffffff"/>'
    """
    return [
        f'<svg id="{element_id}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{label}">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
