"""Where code is, as its author names it: ``file.py:12``; in a notebook, the cell -- ``In[3]:2`` -- rather than
the temporary file IPython compiles each cell under (``/tmp/ipykernel_1234/3006015857.py``).
"""

from __future__ import annotations

import os
import sys

__all__ = ["place", "file_name"]


def file_name(filename: str) -> str:
    """The name a message gives ``filename``: the notebook cell it is (``In[3]``), else its base name."""
    cell = _cell_number(filename)
    return f"In[{cell}]" if cell is not None else os.path.basename(filename)


def place(filename: str, line: int | None) -> str:
    """``file.py:12``, or ``In[3]:2`` for a line of a notebook cell."""
    name = file_name(filename)
    return name if line is None else f"{name}:{line}"


def _cell_number(filename: str) -> int | None:
    """The execution count of the IPython cell compiled under ``filename``, where IPython is running this
    process and has one (its compiler's ``_filename_map``); else None. IPython is never imported here."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
        number = shell.compile._filename_map.get(filename) if shell is not None else None
    except Exception:  # another IPython version's internals: the file's name serves
        return None
    return number if isinstance(number, int) else None
