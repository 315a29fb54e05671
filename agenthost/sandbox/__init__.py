"""Confinement of an agent's process tree (bubblewrap, its seccomp filter)."""
