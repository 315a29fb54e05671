

def test_the_cli_offers_every_scope() -> None:
    from agenthost.cli import web as cli_web
    from agenthost.web.access import SCOPES

    assert cli_web.SCOPES == SCOPES
