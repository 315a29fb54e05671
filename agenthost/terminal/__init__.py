"""Terminal agents: what a pseudo-terminal's bytes become, and the screen they paint."""
