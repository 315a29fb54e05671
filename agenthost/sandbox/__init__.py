"""Confinement of agents: the sandbox an agent runs in (bubblewrap namespaces, a seccomp
filter, a filesystem with only what its kind needs) and its way out to the network in
the profile ``strict``, an allowlisting proxy that runs outside the sandbox and a small
bridge inside it (docs/sandbox.md). Nothing an agent can reach from inside decides for it.
"""
