"""The building blocks of llmgym's self-contained HTML pages: CSS, escaping and number formats,
tables, cards, the page frame, and matplotlib figures embedded as base64 PNG (no pyplot, no global
state). Used by the evaluation, training and comparison reports.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#fff}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:20px 0 6px}
.sub{color:#59636e;margin-bottom:16px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #d0d7de;border-radius:8px;padding:10px 14px;min-width:140px}
.card .v{font-size:22px;font-weight:600}.card .l{color:#59636e;font-size:12px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:12px 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#59636e;font-size:12px}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:8px;border-radius:6px;font-size:12px;max-height:420px;overflow:auto}
details{margin:6px 0}summary{cursor:pointer}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:8px 12px;border-radius:6px}
.alert{background:#ffebe9;border:1px solid #cf222e;border-left:6px solid #cf222e;color:#82071e;padding:10px 14px;border-radius:6px;margin:12px 0;font-weight:500}
.alert ul{margin:6px 0 0 18px;padding:0}.alert a{color:#82071e}
.sig{font-weight:600;color:#1a7f37}.neg{font-weight:600;color:#cf222e}
"""

NO_MATPLOTLIB = (
    "Figures need matplotlib, which is not installed: pip install 'llmgym[eval]' and run "
    "`llmgym report` on this folder again."
)


# --- building blocks ---------------------------------------------------------------------------


def esc(value: Any) -> str:
    """HTML-escaped text of any value (lone surrogates replaced)."""
    text = value if isinstance(value, str) else str(value)
    return html.escape(text.encode("utf-8", "replace").decode("utf-8"), quote=True)


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a table: ``-`` for missing, fixed digits for floats."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_ci(value: Any, ci: Any) -> str:
    if value is None:
        return "-"
    if not ci or any(c is None or (isinstance(c, float) and math.isnan(c)) for c in ci):
        return fmt(value)
    return f"{fmt(value)} [{fmt(ci[0])}, {fmt(ci[1])}]"


class Raw(str):
    """HTML that :func:`table` and :func:`page` insert as is (already escaped)."""


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric_from: int = 1) -> str:
    """An HTML table; cells from column ``numeric_from`` on are right-aligned.

    Cells are escaped unless given as ``Raw``.
    """
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="n"' if i >= numeric_from else ""
            text = cell if isinstance(cell, Raw) else esc(cell)
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def cards(items: Sequence[tuple[str, str]]) -> str:
    inner = "".join(
        f'<div class="card"><div class="v">{esc(v)}</div><div class="l">{esc(label)}</div></div>'
        for label, v in items
    )
    return f'<div class="cards">{inner}</div>'


def page(title: str, subtitle: str, sections: Sequence[str]) -> str:
    """A whole HTML document."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body><main>"
        f'<h1>{esc(title)}</h1><div class="sub">{esc(subtitle)}</div>'
        + "\n".join(sections)
        + "</main></body></html>\n"
    )


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def figure(
    draw: Callable[[Any], None], *, width: float, height: float, caption: str, alt: str
) -> str:
    """A matplotlib figure drawn by ``draw(fig)``, embedded as a base64 PNG ``<figure>``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    draw(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def _grid(n: int, cols: int = 3) -> tuple[int, int]:
    cols = max(1, min(cols, n))
    return math.ceil(n / cols), cols
