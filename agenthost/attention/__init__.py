"""Attention: what reaches a person when an agent needs one, and what is decided
without one.

- :mod:`agenthost.attention.policy` (sans-IO): the approval policy's decision on a
  permission request, and why.
- :mod:`agenthost.attention.links` (sans-IO): signed, expiring, single-use Approve and
  Deny links.
- :mod:`agenthost.attention.notices` (sans-IO): when a notice is due (one per waiting
  episode, after a delay).
- :mod:`agenthost.attention.channels` and :mod:`agenthost.attention.notifier`: sending
  notices (webhook, ntfy, desktop, command) from the daemon, retried, recorded.
"""
