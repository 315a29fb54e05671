"""Confinement of agents: a sandbox per agent (``--sandbox PROFILE``, docs/sandbox.md).

An agent and everything it starts are untrusted, though they run as the user. Its
command runs under bubblewrap in its own user, mount, PID, IPC and UTS namespaces (and
network namespace unless the profile is ``net``) with a seccomp filter: the system
read-only, its worktree read-write, a private ``/tmp``, an empty ``$HOME`` holding
only what its kind needs, and nothing of the agenthost home. In the ``strict`` profile
its only way out is an allowlisting HTTP proxy that runs in the host, outside.

- :mod:`~agenthost.sandbox.profiles`: the profiles and what a spawn asks for (no I/O);
- :mod:`~agenthost.sandbox.kinds`: what each agent kind gets bound and may reach;
- :mod:`~agenthost.sandbox.bwrapargs`: bubblewrap's command line for a layout (no I/O);
- :mod:`~agenthost.sandbox.layout`: the layout of one agent's sandbox, from its files;
- :mod:`~agenthost.sandbox.machine`: what this machine can confine, and why not;
- :mod:`~agenthost.sandbox.seccomp`: the seccomp filter (what namespaces do not cover);
- :mod:`~agenthost.sandbox.allowlist`, :mod:`~agenthost.sandbox.proxyrules`,
  :mod:`~agenthost.sandbox.proxy`: the hosts ``strict`` reaches and the proxy outside;
- :mod:`~agenthost.sandbox.inner`: the bridge inside, in front of the agent;
- :mod:`~agenthost.sandbox.runner`: the sandbox a host runs its agent in.
"""
