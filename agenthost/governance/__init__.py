"""Governance decisions, sans-IO (rules in, decision and reason out): budgets. The host
applies them at one place and records them as ``governance`` events; the daemon's
limits live with the daemon (:mod:`agenthost.daemon.limits`)."""
