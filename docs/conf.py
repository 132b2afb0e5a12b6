"""Sphinx configuration for the API reference (built by scripts/docs.sh into build/docs)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The checkout's package, with its extension modules built in place by scripts/setup.sh.
sys.path.insert(0, ROOT)

import mappedbus_py  # noqa: E402

project = "mappedbus_py"
author = "mappedbus_py authors"
copyright = "mappedbus_py authors, Apache-2.0"
release = version = mappedbus_py.__version__

extensions = ["sphinx.ext.autodoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Cython compiles with embedsignature=True: the first docstring line of an extension class or
# method is its signature, which autodoc takes as the signature.
autodoc_docstring_signature = True
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
# Sections of the Markdown pages get anchors, so links such as (#opening-a-file) resolve.
myst_heading_anchors = 3

html_theme = "alabaster"
html_title = f"mappedbus_py {release}"


def _code_blocks(app, what, name, obj, options, lines):
    """The project's docstrings show examples as an indented block after a paragraph (plain-text
    style); reStructuredText needs ``::`` before such a block. Add it where it is missing."""
    def indent(line):
        return len(line) - len(line.lstrip())
    i = 1
    while i < len(lines) - 1:
        prev, blank, nxt = lines[i - 1], lines[i], lines[i + 1]
        if (not blank.strip() and prev.strip() and nxt.strip() and indent(nxt) > indent(prev)
                and not prev.rstrip().endswith("::") and not prev.lstrip().startswith((".. ", ":"))):
            if prev.rstrip().endswith(":"):
                lines[i - 1] = prev.rstrip() + ":"
            else:
                lines[i:i] = ["", " " * indent(prev) + "::"]
                i += 2
        i += 1


def setup(app):
    app.connect("autodoc-process-docstring", _code_blocks)
