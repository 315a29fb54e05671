"""``python -m agenthost`` runs the CLI."""

from agenthost.cli import main

if __name__ == "__main__":
    main()
