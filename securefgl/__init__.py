"""securefgl: privacy-hardened federated graph learning (see DESIGN.md)."""

__version__ = "0.1.0"
