"""k3ref: the Kimi K3 PyTorch reference on OFFICIAL semantics (float64 by default)."""
