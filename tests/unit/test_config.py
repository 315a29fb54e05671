"""config.toml: the models, the errors a person reads, and re-reading on change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agenthost.config import (
    DEFAULT_CONFIG,
    ConfigFile,
    HomeConfig,
    dump_json,
    load_config,
    parse_config,
    parse_duration,
)
from agenthost.errors import ConfigError

FULL = """
[notify]
events = ["waiting", "died", "finished"]
delay = "30s"
retries = 2

[notify.channels.phone]
type = "ntfy"
url = "https://ntfy.example/agents"
token = "tk_secret"
priority = 4

[notify.channels.hook]
type = "webhook"
url = "http://127.0.0.1:9999/hook"
secret_file = "/run/secrets/hook"
headers = { "X-Team" = "a" }

[notify.channels.me]
type = "desktop"

[notify.channels.script]
type = "command"
argv = ["/usr/local/bin/page-me", "--loud"]
timeout = 5

[[notify.override]]
agent = "build-*"
mute = true

[[notify.override]]
project = "web"
channels = ["phone"]
events = ["waiting"]
delay = "2m"

[policy]
ask_timeout = "15m"

[[policy.rule]]
tool = "Read"
decision = "allow"

[[policy.rule]]
tool = "Bash"
command_regex = 'git (status|diff)( .*)?'
decision = "allow"
reason = "read-only git"

[[policy.rule]]
path = "/etc/**"
decision = "deny"

[web]
public_url = "https://box.example:8765/"
link_ttl = "30m"
"""


def test_a_full_file_reads_into_the_models() -> None:
    config = parse_config(FULL)
    notify = config.notify
    assert notify.events == ["waiting", "died", "finished"]
    assert (notify.delay, notify.retries) == (30.0, 2)
    assert set(notify.channels) == {"phone", "hook", "me", "script"}
    assert notify.channels["script"].timeout == 5.0
    assert config.policy.ask_timeout == 900.0
    assert [r.decision for r in config.policy.rule] == ["allow", "allow", "deny"]
    assert config.web.public_url == "https://box.example:8765"  # no trailing slash
    assert config.web.link_ttl == 1800.0


def test_overrides_pick_the_first_match_and_inherit_the_rest() -> None:
    notify = parse_config(FULL).notify
    muted = notify.for_agent("build-7", "web")
    assert muted.events == () and muted.channels == ()
    web = notify.for_agent("frontend", "web")
    assert (web.events, web.delay, web.channels) == (("waiting",), 120.0, ("phone",))
    other = notify.for_agent("x", "api")
    assert other.events == ("waiting", "died", "finished") and other.delay == 30.0
    assert set(other.channels) == {"phone", "hook", "me", "script"}


def test_an_empty_file_is_the_defaults() -> None:
    config = parse_config("")
    assert config == DEFAULT_CONFIG == HomeConfig()
    assert config.notify.events == ["waiting", "failed", "died"]
    assert config.policy.rule == [] and config.policy.ask_timeout is None
    assert config.web.public_url is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[notify]\ndelai = 3", "notify.delai: unknown key (did you mean 'delay'?)"),
        ("colour = 1", "colour: unknown key"),
        ("notfy = 1", "notfy: unknown key (did you mean 'notify'?)"),
        ('[web]\nlink_tll = "1h"', "web.link_tll: unknown key (did you mean 'link_ttl'?)"),
        (
            "[[policy.rule]]\ncomand = 'x'",
            "policy.rule[1].comand: unknown key (did you mean 'command'?)",
        ),
        (
            "[[notify.override]]\nagent = 'a'\nchanels = []",
            "override[1].chanels: unknown key (did you mean 'channels'?)",
        ),
        (
            '[notify.channels.p]\ntype = "ntfy"\nurl = "http://x"\nprioity = 3',
            "p.prioity: unknown key (did you mean 'priority'?)",
        ),
        (
            '[notify.channels.p]\ntype = "pager"\nurll = 1',
            "does not match any of the expected tags",
        ),
        ("[notify.channels]\np = 3", "notify.channels.p: Input should be"),
        # nothing close: no guess
        ("[notify]\nzzzzzz = 1\n[web]\nlink_ttl = 0", "notify.zzzzzz: unknown key; web."),
        ('[web]\nlink_ttl = "0s"', "web.link_ttl: must be more than 0 seconds"),
        ("[web]\nlink_ttl = 0", "web.link_ttl: must be more than 0 seconds"),
        (
            '[notify.channels.c]\ntype = "command"\nargv = ["x"]\ntimeout = "0m"',
            "c.timeout: must be more",
        ),
        ('[notify.channels.d]\ntype = "desktop"\ntimeout = 0', "d.timeout: must be more"),
        ('[[policy.rule]]\ndecision = "maybe"', "policy.rule[1].decision"),
        ('[[policy.rule]]\ntool = "Bash"', "policy.rule[1].decision: Field required"),
        ('[notify.channels.p]\ntype = "ntfy"\nurl = "ftp://x"', "notify.channels.p.url"),
        ('[notify.channels.p]\ntype = "pager"', "notify.channels.p"),
        ('[notify.channels.p]\ntype = "command"\nargv = []', "notify.channels.p.argv"),
        ('[policy]\nask_timeout = "soon"', "is not a duration"),
        ("[policy]\nask_timeout = -5", "is not a duration"),
        ("[policy]\nask_timeout = true", "is not a duration"),
        ('[notify]\nevents = ["lunch"]', "notify.events[1]"),
        ("x = [", "not valid TOML"),
        ('[[policy.rule]]\ndecision = "allow"\ncommand_regex = "("', "not a regular"),
        (
            '[[policy.rule]]\ndecision = "allow"\ncommand = "a"\ncommand_regex = "a"',
            "not both",
        ),
        ('[[notify.override]]\nagent = "a"\nchannels = ["nope"]', "names channel 'nope'"),
        ("[[notify.override]]\nmute = true", "needs agent or project"),
        (
            '[notify.channels.h]\ntype = "webhook"\nurl = "http://x"\nsecret = "a"\n'
            'secret_file = "/f"',
            "not both",
        ),
        ('[notify.channels.h]\ntype = "ntfy"\nurl = "http://x"\npriority = 9', "priority"),
        ('[web]\npublic_url = "box:8765"', "web.public_url"),
        ("[notify]\nretries = 1000", "notify.retries"),
    ],
)
def test_a_bad_file_is_refused_with_what_and_where(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "home/config.toml")
    assert caught.value.message.startswith("home/config.toml: ")
    assert says in caught.value.message


def test_a_zero_delay_is_allowed_it_notifies_at_once() -> None:
    config = parse_config('[notify]\ndelay = "0s"\n[[notify.override]]\nagent = "a"\ndelay = 0')
    assert config.notify.delay == 0 and config.notify.for_agent("a", "").delay == 0


def test_many_errors_are_summed_up() -> None:
    text = "\n".join(f"k{i} = {i}" for i in range(9))
    message = pytest.raises(ConfigError, parse_config, text).value.message
    assert message.count("unknown key") == 5 and message.endswith("and 4 more")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("1.5m", 90.0), ("2h", 7200.0), ("1d", 86400.0), (3, 3.0)],
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "5 minutes", "-1", "1w", "nan", "1e3", "٣s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_the_json_view_hides_secrets() -> None:
    data = dump_json(parse_config(FULL))
    assert data["notify"]["channels"]["phone"]["token"] == "(set)"
    assert "tk_secret" not in str(data)


def test_load_reads_the_home_and_a_missing_file_is_the_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == DEFAULT_CONFIG
    (tmp_path / "config.toml").write_text('[web]\npublic_url = "http://h:1"\n')
    assert load_config(tmp_path).web.public_url == "http://h:1"


@pytest.mark.parametrize(
    ("raw", "says"),
    [(b"\xff\xfe[web]", "not UTF-8"), (b"a" * ((1 << 20) + 1), "larger than")],
)
def test_load_refuses_garbage_files(tmp_path: Path, raw: bytes, says: str) -> None:
    (tmp_path / "config.toml").write_bytes(raw)
    with pytest.raises(ConfigError, match=says):
        load_config(tmp_path)


def test_a_directory_in_its_place_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    with pytest.raises(ConfigError, match="config.toml is a directory, not a regular file"):
        load_config(tmp_path)


def test_the_file_is_reread_when_it_changes_and_a_bad_edit_keeps_the_last_good(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    watched = ConfigFile(tmp_path)
    assert watched.get() == DEFAULT_CONFIG and watched.error is None
    path.write_text('[policy]\nask_timeout = "1m"\n')
    assert watched.get().policy.ask_timeout == 60.0
    path.write_text("[policy]\nask_timeout = \n")  # a half-saved edit
    assert watched.get().policy.ask_timeout == 60.0
    assert watched.error is not None and "not valid TOML" in watched.error
    path.write_text('[policy]\nask_timeout = "2m"\n')
    os.utime(path, ns=(1, 1))  # same size, another mtime: still noticed
    assert watched.get().policy.ask_timeout == 120.0 and watched.error is None
    path.unlink()
    assert watched.get() == DEFAULT_CONFIG and watched.error is None


def nothing_applies(config: HomeConfig) -> bool:
    """What a refused config.toml gives: no rule, no "allow for this session", no
    channel, no links (whatever the file, or an earlier good one, said)."""
    return (
        config.policy.rule == []
        and config.policy.session_grants is False
        and config.notify.channels == {}
        and config.web.public_url is None
    )


def test_a_chmod_to_writable_by_others_is_noticed_and_nothing_of_the_file_applies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[policy.rule]]\ndecision = "allow"\n[policy]\nask_timeout = "1m"\n')
    path.chmod(0o600)
    watched = ConfigFile(tmp_path)
    assert watched.get().policy.rule[0].decision == "allow" and not watched.refused
    path.chmod(0o666)  # the same size, mtime and inode: only its ctime changes
    config = watched.get()
    assert watched.refused
    assert watched.error == f"{path} is writable by others (mode 0666): chmod go-w it"
    assert nothing_applies(config)  # not the last good one
    path.chmod(0o600)
    assert watched.get().policy.rule[0].decision == "allow"
    assert watched.error is None and not watched.refused


def test_a_refused_file_then_an_invalid_one_keeps_nothing_of_before(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[policy.rule]]\ndecision = "allow"\n')
    watched = ConfigFile(tmp_path)
    assert watched.get().policy.rule
    path.chmod(0o620)
    assert nothing_applies(watched.get()) and watched.refused
    path.write_text("[policy\n")  # fixed mode, broken text: invalid, not refused
    path.chmod(0o600)
    assert nothing_applies(watched.get())
    assert not watched.refused and watched.error is not None and "not valid TOML" in watched.error


def test_a_symlink_put_in_its_place_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text('[[policy.rule]]\ndecision = "allow"\n')
    watched = ConfigFile(tmp_path)
    assert watched.get() == DEFAULT_CONFIG
    (tmp_path / "config.toml").symlink_to(elsewhere)
    assert nothing_applies(watched.get())
    assert watched.error is not None and "config.toml is a symbolic link" in watched.error
    with pytest.raises(ConfigError, match="config.toml is a symbolic link"):
        load_config(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
def test_a_file_given_to_another_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[policy.rule]]\ndecision = "allow"\n')
    watched = ConfigFile(tmp_path)
    assert watched.get().policy.rule
    os.chown(path, 65534, 65534)  # mode, size, mtime unchanged
    assert nothing_applies(watched.get())
    says = f"{path} is owned by uid 65534, not you (uid 0): remove it or chown it"
    assert watched.error == says
    with pytest.raises(ConfigError, match="owned by uid 65534"):
        load_config(tmp_path)


def test_a_refusal_for_the_directory_ends_when_the_directory_is_fixed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[[policy.rule]]\ndecision = "allow"\n')
    (home / "config.toml").chmod(0o600)
    home.chmod(0o777)
    watched = ConfigFile(home)
    assert nothing_applies(watched.get())
    assert watched.error == f"{home} is writable by others (mode 0777): chmod go-w it"
    home.chmod(0o700)  # the file itself is unchanged
    assert watched.get().policy.rule and watched.error is None
