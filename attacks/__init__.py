"""Attack suite: leakage audits on what a named adversary saw (see DESIGN.md)."""
