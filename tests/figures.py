"""What the plot tests read off a matplotlib figure: tick labels, drawn extents, overlaps."""

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def ticks(axis_labels):
    return [label.get_text() for label in axis_labels]


def drawn(fig):
    """Lay the figure out and draw it (Agg), so that extents are what a saved file shows; returns the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1
