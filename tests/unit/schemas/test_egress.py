"""The egress policy (jury.schemas.egress, jury.schemas.egress_hosts): pure decisions, from the
settings as an operator writes them, a URL and the addresses its name resolves to."""

from __future__ import annotations

import ipaddress

import pytest

from jury.errors import EgressRefused, PermanentJudgeError
from jury.schemas.egress import (
    EgressPolicy,
    ModelCall,
    plan_endpoint_call,
    plan_model_call,
)
from jury.schemas.egress_hosts import destination, normal_host, parse_rule, special_kind
from jury.settings import Settings

DEFAULT = EgressPolicy()
LOCAL = EgressPolicy.build(allow="loopback")


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


# --- hosts as written -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/v1",  # 127.0.0.1 as one number
        "http://0x7f.1/v1",  # hexadecimal, two parts
        "http://0x7f000001/v1",
        "http://127.1/v1",  # three parts short
        "http://0177.0.0.1/v1",  # octal
        "http://127.0.0.01/v1",  # a leading zero: octal to inet_aton
        "http://127.0.0.1./v1",  # a final dot after an address
        "http://[::ffff:127.0.0.1]/v1",  # IPv4-mapped IPv6
        "http://[::ffff:7f00:1]/v1",
        "http://[::127.0.0.1]/v1",  # IPv4-compatible IPv6
        "http://[fe80::1%25eth0]/v1",  # a zone
        "http://[127.0.0.1]/v1",  # IPv4 in brackets
        "http://exämple.com/v1",  # not ASCII: IDNA 2003 and 2008 disagree
        "http://evil.com\\@127.0.0.1/v1",  # a backslash: parsers split it differently
        "http://api.openai.com /v1",
        "http://a%2eb/v1",  # percent-encoding in the host
        "ftp://api.openai.com/",
        "http:///v1",
        "http://x:99999/v1",
    ],
)
def test_hosts_written_in_odd_ways_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        destination(url)


@pytest.mark.parametrize(
    ("url", "host", "port", "address"),
    [
        ("http://127.0.0.1:8011/v1", "127.0.0.1", 8011, "127.0.0.1"),
        ("https://API.OpenAI.com/v1", "api.openai.com", 443, None),
        ("http://api.openai.com./v1", "api.openai.com", 80, None),  # an FQDN's final dot
        ("http://[::1]:9/v1", "::1", 9, "::1"),
        ("http://[0:0:0:0:0:0:0:1]/v1", "::1", 80, "::1"),
        ("https://user:pw@host.example:8443/v1", "host.example", 8443, None),
        ("http://api.openai.com@127.0.0.1/v1", "127.0.0.1", 80, "127.0.0.1"),  # userinfo
        ("http://my_vllm:8000/v1", "my_vllm", 8000, None),  # a Docker service name
    ],
)
def test_destination_is_what_the_request_reaches(
    url: str, host: str, port: int, address: str | None
) -> None:
    dest = destination(url)
    assert (dest.host, dest.port) == (host, port)
    assert dest.address == (ip(address) if address else None)


def test_a_host_name_is_matched_linearly_whatever_its_length() -> None:
    with pytest.raises(ValueError, match="not a valid host name"):
        normal_host("a" * 100_000 + "!")
    with pytest.raises(ValueError):
        normal_host("-bad.example")


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("10.1.2.3", "private"),
        ("172.31.255.255", "private"),
        ("192.168.0.1", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata services
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("0.0.0.0", "'this host'"),
        ("224.0.0.1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("198.18.0.1", "benchmarking"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fd00::1", "private (unique local)"),
        ("fe80::1", "link-local"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),  # as a resolver may answer it: the IPv4 inside
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("2002:7f00:1::", "6to4"),
        ("2001:db8::1", "documentation"),
    ],
)
def test_special_addresses_by_kind(address: str, kind: str) -> None:
    assert special_kind(ip(address)) == kind


PUBLIC = ["8.8.8.8", "162.159.140.245", "2606:4700::1111", "64:ff9b::808:808", "::ffff:1.1.1.1"]


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_not_special(address: str) -> None:
    assert special_kind(ip(address)) is None


# --- rules --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "reached", "not_reached"),
    [
        ("127.0.0.1:8011", ["http://127.0.0.1:8011/v1"], ["http://127.0.0.1:8012/v1"]),
        ("127.0.0.0/8", ["http://127.9.9.9:1/"], ["http://10.0.0.1/"]),
        ("[::1]:8000", ["http://[::1]:8000/"], ["http://[::1]:8001/", "http://127.0.0.1:8000/"]),
        ("[fd00::]/8", ["http://[fd12::1]/"], ["http://[fe80::1]/"]),
        ("localhost", ["http://localhost:1/", "http://LOCALHOST/"], ["http://127.0.0.1/"]),
        ("*.corp.example", ["https://llm.corp.example/"], ["https://corp.example/"]),
        ("vllm:8000", ["http://vllm:8000/v1"], ["http://vllm:8001/v1", "http://vllm.x:8000/"]),
    ],
)
def test_rules_admit_what_they_name(entry: str, reached: list[str], not_reached: list[str]) -> None:
    policy = EgressPolicy.build(allow=entry)
    for url in reached:
        assert policy.reach_problem(destination(url)) is None, url
    for url in not_reached:
        assert policy.reach_problem(destination(url)) is not None, url


def test_keywords_stand_for_their_addresses() -> None:
    for url in ("http://127.0.0.1:8011/", "http://[::1]:80/", "http://localhost:5/"):
        assert LOCAL.reach_problem(destination(url)) is None
    private = EgressPolicy.build(allow="private")
    for url in ("http://10.0.0.5:8000/", "http://192.168.1.2/", "http://[fd00::2]/"):
        assert private.reach_problem(destination(url)) is None
    # Link-local (cloud metadata) is in neither: it takes a network written out.
    metadata = destination("http://169.254.169.254/latest/meta-data/")
    assert private.reach_problem(metadata) is not None
    assert LOCAL.reach_problem(metadata) is not None
    ported = EgressPolicy.build(allow="loopback:8011")
    assert ported.reach_problem(destination("http://127.0.0.1:8011/")) is None
    assert ported.reach_problem(destination("http://127.0.0.1:6379/")) is not None


@pytest.mark.parametrize("entry", ["0x7f.1", "2130706433", "exämple", "host:0", "host:x", "a b/c"])
def test_a_bad_rule_names_its_setting(entry: str) -> None:
    with pytest.raises(ValueError, match="JURY_EGRESS_ALLOW"):
        EgressPolicy.build(allow=entry)


def test_settings_parse_the_policy_and_refuse_a_bad_one() -> None:
    env = {
        "JURY_EGRESS_ALLOW": "127.0.0.1:8000, vllm.internal",
        "JURY_EGRESS_PUBLIC": "false",
        "JURY_KEY_HOSTS": '{"VLLM_KEY": ["vllm.internal"]}',
        "JURY_PLAIN_VARS": "MODEL_TAG SIM_URL",
    }
    policy = Settings.egress_from_env(env)
    assert policy == Settings.from_env(env).egress_policy()
    assert not policy.public and policy.plain_vars == {"MODEL_TAG", "SIM_URL"}
    assert policy.key_problem("VLLM_KEY", destination("http://vllm.internal/v1")) is None
    assert Settings.from_env(Settings.from_env(env).to_env()).egress_policy() == policy
    with pytest.raises(ValueError, match="JURY_KEY_HOSTS"):
        Settings(key_hosts={"NOT A NAME": ["x"]})
    with pytest.raises(ValueError, match=r"JURY_KEY_HOSTS\[K\]"):
        Settings(key_hosts={"K": ["0x7f.1"]})
    with pytest.raises(ValueError):
        Settings.egress_from_env({"JURY_KEY_HOSTS": "{not json"})


# --- reaching -----------------------------------------------------------------------------------


def test_loopback_and_private_are_refused_by_default_naming_the_setting() -> None:
    problem = DEFAULT.reach_problem(destination("http://127.0.0.1:8000/v1"))
    assert problem is not None
    assert "loopback" in problem and "JURY_EGRESS_ALLOW=127.0.0.1:8000" in problem
    assert DEFAULT.reach_problem(destination("http://10.0.0.5:8000/v1")) is not None
    assert DEFAULT.reach_problem(destination("http://localhost:8000/v1")) is not None
    assert DEFAULT.reach_problem(destination("http://[::1]/v1")) is not None
    assert DEFAULT.reach_problem(destination("http://0.0.0.0:8000/v1")) is not None


def test_a_name_is_judged_by_every_address_it_resolves_to() -> None:
    dest = destination("http://rebind.attacker.example:8000/v1")
    assert DEFAULT.needs_resolving(dest)
    assert DEFAULT.reach_problem(dest, (ip("93.184.216.34"),)) is None
    problem = DEFAULT.reach_problem(dest, (ip("93.184.216.34"), ip("127.0.0.1")))
    assert problem is not None and "at 127.0.0.1" in problem
    assert DEFAULT.reach_problem(dest, (ip("::ffff:127.0.0.1"),)) is not None
    assert DEFAULT.reach_problem(dest, (ip("169.254.169.254"),)) is not None
    assert DEFAULT.reach_problem(dest, ()) is not None  # resolves to nothing
    # A network rule admits the addresses; a name rule admits the name wherever it resolves.
    assert LOCAL.reach_problem(dest, (ip("127.0.0.1"),)) is None
    named = EgressPolicy.build(allow="rebind.attacker.example")
    assert not named.needs_resolving(dest) and named.reach_problem(dest) is None


def test_public_hosts_can_be_refused_too() -> None:
    closed = EgressPolicy.build(allow="api.openai.com", public=False)
    dest = destination("https://example.com/v1")
    problem = closed.reach_problem(dest, (ip("93.184.216.34"),))
    assert problem is not None and "JURY_EGRESS_PUBLIC=false" in problem
    assert closed.reach_problem(destination("https://api.openai.com/v1")) is None


# --- keys and variables ---------------------------------------------------------------------


def test_each_provider_key_goes_to_its_own_host_only_by_default() -> None:
    openai = destination("https://api.openai.com/v1")
    assert DEFAULT.key_problem("OPENAI_API_KEY", openai) is None
    anthropic = destination("https://api.anthropic.com/")
    assert DEFAULT.key_problem("ANTHROPIC_API_KEY", anthropic) is None
    problem = DEFAULT.key_problem("OPENAI_API_KEY", destination("http://proxy.example/v1"))
    assert problem is not None and "api.openai.com" in problem and "JURY_KEY_HOSTS" in problem
    assert DEFAULT.key_problem("ANTHROPIC_API_KEY", openai) is not None


@pytest.mark.parametrize("variable", ["HOME", "PATH", "AWS_SECRET_ACCESS_KEY", "JURY_BROKER_URL"])
def test_a_variable_not_listed_is_no_key(variable: str) -> None:
    problem = DEFAULT.key_problem(variable, destination("https://api.openai.com/v1"))
    assert problem is not None and f"{variable} is not a key variable" in problem
    assert "JURY_KEY_HOSTS" in problem


def test_an_operator_list_replaces_the_built_in_one() -> None:
    policy = EgressPolicy.build(key_hosts={"OPENAI_API_KEY": ["proxy.corp.example"]})
    assert policy.key_problem("OPENAI_API_KEY", destination("https://proxy.corp.example/")) is None
    assert policy.key_problem("OPENAI_API_KEY", destination("https://api.openai.com/")) is not None


def test_placeholders_take_plain_variables_anywhere_and_keys_only_where_listed() -> None:
    evil = destination("http://evil.example/v1")
    assert DEFAULT.variable_problem("JURY_SIMULATOR_URL", evil) is None  # plain by default
    problem = DEFAULT.variable_problem("AWS_SECRET_ACCESS_KEY", evil)
    assert problem is not None and "JURY_PLAIN_VARS" in problem
    assert DEFAULT.variable_problem("OPENAI_API_KEY", evil) is not None
    assert DEFAULT.variable_problem("OPENAI_API_KEY", destination("https://api.openai.com")) is None
    # Where the provider's own endpoint is (None): only a plain variable.
    assert DEFAULT.variable_problem("OPENAI_API_KEY", None) is not None


# --- a model call -------------------------------------------------------------------------------


def plan(policy: EgressPolicy = DEFAULT, **call: object) -> ModelCall:
    fields: dict[str, object] = {"provider": "openai", "api_base": None, "api_key_env": None}
    fields.update(call)
    return plan_model_call(policy, "judge j", **fields)  # type: ignore[arg-type]


def refusal(policy: EgressPolicy = DEFAULT, **call: object) -> str:
    with pytest.raises(EgressRefused) as caught:
        plan(policy, **call)
    assert isinstance(caught.value, PermanentJudgeError) and not caught.value.transient
    assert caught.value.kind == "egress_refused"
    return str(caught.value)


def test_an_openai_judge_with_a_foreign_api_base_gets_no_key() -> None:
    call = plan(LOCAL, api_base="http://127.0.0.1:8011/v1")
    assert call.key_variable is None and call.explicit_key  # a placeholder key instead
    assert call.withheld == "OPENAI_API_KEY" and "OPENAI_API_KEY" not in call.carried
    own = plan(api_base="https://api.openai.com/v1")
    assert own.key_variable == "OPENAI_API_KEY" and own.carried == ("OPENAI_API_KEY",)
    native = plan()  # no api_base: LiteLLM's own variable, checked at each request
    assert not native.explicit_key and native.carried == ("OPENAI_API_KEY",)


def test_api_key_env_goes_only_where_its_variable_may() -> None:
    assert "HOME is not a key variable" in refusal(api_key_env="HOME")
    listed = EgressPolicy.build(allow="loopback", key_hosts={"VLLM_KEY": ["127.0.0.1:8000"]})
    call = plan(listed, api_base="http://127.0.0.1:8000/v1", api_key_env="VLLM_KEY")
    assert call.key_variable == "VLLM_KEY" and call.carried == ("VLLM_KEY",)
    problem = refusal(listed, api_base="http://127.0.0.1:8001/v1", api_key_env="VLLM_KEY")
    assert "VLLM_KEY may be sent only to 127.0.0.1:8000" in problem
    # Without an api_base the key goes to the provider's own host: another provider's key may not.
    assert "OPENAI_API_KEY" in refusal(provider="anthropic", api_key_env="OPENAI_API_KEY")
    azure = plan(provider="azure", api_key_env="AZURE_API_KEY")  # its host: per resource
    assert azure.destination is None and azure.carried == ("AZURE_API_KEY",)


def test_a_loopback_api_base_is_refused_with_the_setting_to_allow_it() -> None:
    problem = refusal(api_base="http://127.0.0.1:8000/v1")
    assert "judge j: api_base" in problem and "JURY_EGRESS_ALLOW=127.0.0.1:8000" in problem
    assert "docs/limits-and-security.md" in problem and len(problem) < 400
    assert "unusual way" in refusal(LOCAL, api_base="http://2130706433/v1")


def test_placeholders_in_model_or_api_base_must_be_allowed_to_go_there() -> None:
    base = "http://evil.example/v1"
    assert "AWS_SECRET_ACCESS_KEY" in refusal(api_base=base, placeholders=["AWS_SECRET_ACCESS_KEY"])
    assert plan(api_base=base, placeholders=["JURY_SIMULATOR_URL"]).destination is not None
    # The provider's own endpoint is known: a key variable listed for it may go in the model.
    assert plan(placeholders=["OPENAI_API_KEY"]).destination is not None
    assert "HOME" in refusal(placeholders=["HOME"])


def test_providers_jury_does_not_know_get_no_api_base() -> None:
    assert "openai/<model>" in refusal(provider="bedrock", api_base="https://evil.example/")
    assert plan(provider="bedrock").carried == ()  # LiteLLM's own credentials, own endpoint
    assert "api_base" in refusal(provider="bedrock", api_key_env="OPENAI_API_KEY")
    assert plan(provider="", api_base=None).key_variable is None


def test_an_endpoint_candidate_carries_only_what_may_go_there() -> None:
    url = "http://127.0.0.1:9000/answer"
    assert "JURY_EGRESS_ALLOW" in str(_endpoint_refusal(DEFAULT, url, ()))
    assert plan_endpoint_call(LOCAL, "candidate c", url, ()).port == 9000
    assert "BOT_TOKEN" in str(_endpoint_refusal(LOCAL, url, ("BOT_TOKEN",)))
    token = EgressPolicy.build(allow="loopback", key_hosts={"BOT_TOKEN": ["127.0.0.1:9000"]})
    assert plan_endpoint_call(token, "candidate c", url, ("BOT_TOKEN",)).host == "127.0.0.1"


def _endpoint_refusal(policy: EgressPolicy, url: str, carried: tuple[str, ...]) -> EgressRefused:
    with pytest.raises(EgressRefused) as caught:
        plan_endpoint_call(policy, "candidate c", url, carried)
    return caught.value


def test_the_transport_check_covers_every_variable_a_call_carries() -> None:
    evil = destination("https://evil.example/v1")
    problem = DEFAULT.carried_problem(("OPENAI_API_KEY",), evil)
    assert problem is not None and "the key in OPENAI_API_KEY" in problem
    assert DEFAULT.carried_problem(("JURY_SIMULATOR_URL",), evil) is None
    openai = destination("https://api.openai.com")
    assert DEFAULT.carried_problem(("OPENAI_API_KEY",), openai) is None


def test_rule_parsing_keeps_what_was_written() -> None:
    (rule,) = parse_rule("  Vllm.Internal:8000 ", "JURY_EGRESS_ALLOW")
    assert (rule.written, rule.name, rule.port) == ("Vllm.Internal:8000", "vllm.internal", 8000)


def test_an_azure_key_goes_only_to_the_resource_the_operator_lists() -> None:
    # Anyone can name an Azure resource: `*.openai.azure.com` would hand the key to theirs.
    attacker = destination("https://attacker.openai.azure.com/openai")
    assert DEFAULT.key_problem("AZURE_API_KEY", attacker) is not None
    mine = EgressPolicy.build(key_hosts={"AZURE_API_KEY": ["myres.openai.azure.com"]})
    assert mine.key_problem("AZURE_API_KEY", destination("https://myres.openai.azure.com/")) is None
    assert mine.key_problem("AZURE_API_KEY", attacker) is not None
    call = plan(provider="azure", api_base="https://attacker.openai.azure.com/openai")
    assert call.key_variable is None and call.withheld == "AZURE_API_KEY"
    # Ollama's own key: its own port on this machine only.
    local = plan(provider="ollama")
    assert local.destination is not None and local.destination.label == "localhost:11434"
