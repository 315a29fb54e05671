"""Automation: agents on a schedule and agents started by signed webhooks (docs/automation.md)."""
