"""k3ref: the Kimi K3 PyTorch reference on the official semantics of docs/semantics.md (float64 by default)."""
