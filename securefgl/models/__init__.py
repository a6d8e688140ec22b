"""Backbones: GCN, GraphSAGE and MLP (PyG layers), and flat parameter vectors."""

from securefgl.models.backbones import MODELS, build_model, get_flat, set_flat

__all__ = ["MODELS", "build_model", "get_flat", "set_flat"]
