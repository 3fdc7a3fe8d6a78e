"""fluxgate-core: the small library every Fluxgate service imports (and nothing else)."""
