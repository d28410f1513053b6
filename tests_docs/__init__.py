"""The docs check: every snippet of README.md and docs/*.md runs (``make docs-check``)."""
