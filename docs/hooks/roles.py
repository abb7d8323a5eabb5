"""A mkdocs hook: the Sphinx roles of the API's docstrings (``:class:`X```, ``:func:`~pkg.f```), which
mkdocstrings renders as the role's name before the code, shown as the code alone -- with ``~``, the last part
of the dotted name, as Sphinx shows it."""

import re

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):<code>(~?)([^<]*)</code>")


def _shown(match: re.Match[str]) -> str:
    short, name = match.group(1), match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if short else name}</code>"


def on_page_content(html: str, **kwargs: object) -> str:
    return _ROLE.sub(_shown, html)
