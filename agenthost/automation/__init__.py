"""Automation: schedules, forks and signed webhooks that start runs."""
