"""Training the small model whose heads the trained-heads page shows (torch: training only)."""
