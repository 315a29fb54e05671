"""Governance decisions, sans-IO (rules in, decision and reason out): budgets and
usage-limit pauses. The host applies them at one place each and records them as
``governance`` events; the daemon's limits live with the daemon
(:mod:`agenthost.daemon.limits`)."""
