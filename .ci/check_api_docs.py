"""CI: every public name (overdub.__all__) appears in the built API reference page, and no docstring's Sphinx
role (``:class:`X```) shows raw there (docs/hooks/roles.py renders them).

Usage: python .ci/check_api_docs.py SITE_DIR. mkdocstrings documents what griffe can see statically; a name
it cannot (e.g. bound by tuple unpacking) must be covered by hand in docs/api.md, and this check says so.
"""

import re
import sys
from pathlib import Path

import overdub

html = (Path(sys.argv[1]) / "api" / "index.html").read_text()
documented = set(re.findall(r'id="overdub\.(\w+)"', html)) | set(re.findall(r"<code>od\.(\w+)</code>", html))
missing = [name for name in overdub.__all__ if name not in documented]
if missing:
    sys.exit(f"docs/api.md does not document: {', '.join(missing)}")
raw = re.findall(r":(?:class|func|meth|mod|data|attr|exc|obj|const):(?:<code>|`)", html)
if raw:
    sys.exit(f"the API reference shows {len(raw)} raw Sphinx roles (docs/hooks/roles.py renders them)")
print(f"API reference documents all {len(overdub.__all__)} public names, with no raw role")
