"""The operator's egress policy: where a call that a batch describes may go, and which of the
workers' environment variables may go with it. Pure: decisions from the settings, a URL and
the addresses a name resolved to; resolving and connecting are the callers'
(jury.worker.calls.egress_guard at each request, jury.batchfile.egress_check at submit);
hosts, addresses and rules are jury.schemas.egress_hosts'.

Who decides: the operator, in the workers' settings (jury.settings: JURY_EGRESS_ALLOW,
JURY_EGRESS_PUBLIC, JURY_KEY_HOSTS, JURY_PLAIN_VARS), never the batch. The batch names an
`api_base`, an `api_key_env`, an HTTP candidate's `url` and headers, `${VAR}` placeholders:
each is checked here against those settings before anything is sent.

- **Reaching**: a URL's host must not be a loopback, private, link-local or other special
  address (each address a name resolves to is checked) unless JURY_EGRESS_ALLOW lists it;
  with JURY_EGRESS_PUBLIC=false, public addresses need listing too. Hosts written in odd
  ways (`2130706433`, `0x7f.1`, `127.1`, `[::ffff:127.0.0.1]`) are refused outright: what
  they mean depends on the parser that reads them.
- **Keys**: an environment variable's value leaves the worker only to the hosts that
  JURY_KEY_HOSTS lists for it (built in: each provider's own variables to its own API host,
  OPENAI_API_KEY to api.openai.com, …). That covers `api_key_env`, the provider's own key
  LiteLLM would send, and every `${VAR}` a call's URL, model or headers take, unless
  JURY_PLAIN_VARS says the variable holds no secret. A variable not listed is no key at all:
  `api_key_env: HOME` is refused.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from jury.errors import EgressRefused
from jury.schemas.egress_hosts import (
    Destination,
    HostRule,
    IPAddress,
    destination,
    parse_rules,
    special_kind,
    split_list,
)

DOCS: Final = "docs/limits-and-security.md, Egress policy"
# Where the settings must be set: the workers enforce them, `jury submit` checks them early.
WHERE: Final = "on the workers and where `jury submit` runs"
DEFAULT_PLAIN_VARS: Final = "JURY_SIMULATOR_URL"


@dataclass(frozen=True)
class ProviderKeys:
    """The variables LiteLLM reads a provider's key from, and the hosts of its API."""

    variables: tuple[str, ...]
    hosts: tuple[str, ...] = ()


# Read in LiteLLM 1.106 (`get_secret("…_API_KEY")` in each provider's code). A provider
# with no host of its own (a self-hosted server's) has its variables listed all the same:
# with an `api_base`, jury passes the key itself, so that LiteLLM never reads one of them.
PROVIDERS: Final[dict[str, ProviderKeys]] = {
    "openai": ProviderKeys(("OPENAI_API_KEY",), ("api.openai.com",)),
    "text-completion-openai": ProviderKeys(("OPENAI_API_KEY",), ("api.openai.com",)),
    "anthropic": ProviderKeys(("ANTHROPIC_API_KEY",), ("api.anthropic.com",)),
    "gemini": ProviderKeys(
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"), ("generativelanguage.googleapis.com",)
    ),
    "mistral": ProviderKeys(("MISTRAL_API_KEY",), ("api.mistral.ai",)),
    "groq": ProviderKeys(("GROQ_API_KEY",), ("api.groq.com",)),
    "deepseek": ProviderKeys(("DEEPSEEK_API_KEY",), ("api.deepseek.com",)),
    "together_ai": ProviderKeys(
        ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY", "TOGETHER_AI_API_KEY"), ("api.together.xyz",)
    ),
    "openrouter": ProviderKeys(("OPENROUTER_API_KEY",), ("openrouter.ai",)),
    "xai": ProviderKeys(("XAI_API_KEY",), ("api.x.ai",)),
    "fireworks_ai": ProviderKeys(
        ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY", "FIREWORKSAI_API_KEY"),
        ("api.fireworks.ai",),
    ),
    "cohere": ProviderKeys(("COHERE_API_KEY",), ("api.cohere.ai", "api.cohere.com")),
    "cohere_chat": ProviderKeys(("COHERE_API_KEY",), ("api.cohere.ai", "api.cohere.com")),
    "perplexity": ProviderKeys(
        ("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"), ("api.perplexity.ai",)
    ),
    "deepinfra": ProviderKeys(("DEEPINFRA_API_KEY",), ("api.deepinfra.com",)),
    # Nowhere by default: any Azure subscriber can name a resource `*.openai.azure.com`, so
    # the operator lists their own.
    "azure": ProviderKeys(("AZURE_API_KEY", "AZURE_OPENAI_API_KEY")),
    "hosted_vllm": ProviderKeys(("HOSTED_VLLM_API_KEY",)),
    "ollama": ProviderKeys(("OLLAMA_API_KEY",), ("localhost:11434",)),
    "ollama_chat": ProviderKeys(("OLLAMA_API_KEY",), ("localhost:11434",)),
}


def default_key_hosts() -> dict[str, tuple[str, ...]]:
    """Each provider variable and the hosts its value may go to by default."""
    hosts: dict[str, tuple[str, ...]] = {}
    for keys in PROVIDERS.values():
        for variable in keys.variables:
            hosts[variable] = tuple(dict.fromkeys((*hosts.get(variable, ()), *keys.hosts)))
    return hosts


KeyRules = tuple[tuple[str, tuple[HostRule, ...]], ...]


def key_rules_of(key_hosts: Mapping[str, Sequence[str]]) -> KeyRules:
    """JURY_KEY_HOSTS over the built-in lists, as rules; ValueError naming the entry at fault.
    A variable it names has its built-in list replaced (name the provider's host again to
    keep it)."""
    merged: dict[str, Sequence[str]] = {**default_key_hosts(), **key_hosts}
    keys = []
    for variable, hosts in sorted(merged.items()):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", variable):
            raise ValueError(f"JURY_KEY_HOSTS: {variable[:80]!r} is not an environment variable")
        if isinstance(hosts, str):
            raise ValueError(f"JURY_KEY_HOSTS: {variable}'s hosts must be a list")
        keys.append((variable, parse_rules(hosts, f"JURY_KEY_HOSTS[{variable}]")))
    return tuple(keys)


@functools.cache
def _default_key_rules() -> KeyRules:
    return key_rules_of({})


# --- the policy ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EgressPolicy:
    """The operator's egress settings, parsed. The defaults are jury's: public hosts only,
    each provider's key to its own API host, JURY_SIMULATOR_URL plain."""

    allow: tuple[HostRule, ...] = ()
    public: bool = True
    key_hosts: KeyRules = field(default_factory=_default_key_rules)
    plain_vars: frozenset[str] = frozenset({DEFAULT_PLAIN_VARS})
    # Computed once: a worker looks its decisions up by policy hundreds of times a second,
    # and hashing every rule each time cost ~11 µs.
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        fields = (self.allow, self.public, self.key_hosts, self.plain_vars)
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def build(
        cls,
        allow: str = "",
        public: bool = True,
        key_hosts: Mapping[str, Sequence[str]] | None = None,
        plain_vars: str = DEFAULT_PLAIN_VARS,
    ) -> EgressPolicy:
        """From the settings as written; ValueError naming the setting at fault."""
        return cls(
            allow=parse_rules(split_list(allow), "JURY_EGRESS_ALLOW"),
            public=public,
            key_hosts=key_rules_of(key_hosts or {}),
            plain_vars=frozenset(split_list(plain_vars)),
        )

    def key_rules(self, variable: str) -> tuple[HostRule, ...] | None:
        """Where `variable`'s value may go; None: it is no key variable."""
        return next((rules for name, rules in self.key_hosts if name == variable), None)

    # -- reaching --------------------------------------------------------------------------

    def allowed_by_name(self, dest: Destination) -> bool:
        """Whether JURY_EGRESS_ALLOW names this host (or its address) itself: it may then be
        reached wherever its name resolves."""
        return any(rule.admits(dest) for rule in self.allow)

    def needs_resolving(self, dest: Destination) -> bool:
        """Whether the host's addresses decide (a name no rule names)."""
        return dest.address is None and not dest.local_name and not self.allowed_by_name(dest)

    def reach_problem(self, dest: Destination, addresses: Sequence[IPAddress] = ()) -> str | None:
        """Why `dest` may not be reached, or None. `addresses`: what its name resolved to
        (unused for an address, `localhost`, or a host the rules name)."""
        if self.allowed_by_name(dest):
            return None
        if dest.address is not None:
            addresses = (dest.address,)
        elif dest.local_name:
            addresses = (ipaddress.IPv4Address("127.0.0.1"),)
        if not addresses:
            return f"{dest.host} resolves to no address"
        for address in addresses:
            if any(rule.admits_address(address, dest.port) for rule in self.allow):
                continue
            shown = dest.host if dest.address is not None else f"{dest.host} (at {address})"
            kind = special_kind(address)
            if kind is not None:
                article = "an" if kind[:1] in "aeiou" else "a"
                return (
                    f"{shown} is {article} {kind} address, which a batch may reach only "
                    f"if the operator allows it: set JURY_EGRESS_ALLOW={dest.label} {WHERE}"
                )
            if not self.public:
                return (
                    f"{shown} is a public address and JURY_EGRESS_PUBLIC=false: add "
                    f"{dest.label} to JURY_EGRESS_ALLOW {WHERE}"
                )
        return None

    # -- what leaves with a call -----------------------------------------------------------

    def key_problem(self, variable: str, dest: Destination | None) -> str | None:
        """Why `variable`'s value may not go to `dest` as a key (None: the provider's own
        endpoint, which jury cannot name: only a variable allowed anywhere may go there)."""
        rules = self.key_rules(variable)
        target = dest.label if dest is not None else "HOST"
        if rules is None:
            return (
                f"{variable} is not a key variable on these workers: list it in JURY_KEY_HOSTS "
                f"with the hosts its value may be sent to, e.g. "
                f'JURY_KEY_HOSTS=\'{{"{variable}": ["{target}"]}}\''
            )
        if dest is None or not any(rule.admits(dest) for rule in rules):
            listed = ", ".join(r.written for r in rules) if rules else "no host"
            where = f"to {dest.label}" if dest is not None else "where its provider sends it"
            return (
                f"the key in {variable} may be sent only to {listed}, not {where}: add "
                f"{target} to {variable}'s list in JURY_KEY_HOSTS to send it there"
            )
        return None

    def variable_problem(self, variable: str, dest: Destination | None) -> str | None:
        """Why a `${variable}` placeholder may not be expanded into a call to `dest`."""
        if variable in self.plain_vars:
            return None
        rules = self.key_rules(variable) or ()
        if dest is not None and any(rule.admits(dest) for rule in rules):
            return None
        target = dest.label if dest is not None else "its host"
        return (
            f"${{{variable}}} would send this worker's {variable} to {target}: a placeholder "
            f"may take a variable listed in JURY_PLAIN_VARS (values that are no secret) or a "
            f"key variable whose JURY_KEY_HOSTS list names {target}"
        )

    def carried_problem(self, variables: Iterable[str], dest: Destination) -> str | None:
        """The first variable of a call's that may not go to `dest` (a key or a placeholder's):
        what every request of the call is checked against, redirects and all."""
        for variable in variables:
            if self.key_rules(variable) is not None and variable not in self.plain_vars:
                problem = self.key_problem(variable, dest)
            else:
                problem = self.variable_problem(variable, dest)
            if problem:
                return problem
        return None


def refused(what: str, reason: str) -> EgressRefused:
    """The one-paragraph refusal of a call: what it was, why, which setting allows it."""
    return EgressRefused(f"{what}: refused by the workers' egress policy: {reason} ({DOCS})")


def checked_destination(url: str, what: str) -> Destination:
    try:
        return destination(url)
    except ValueError as exc:
        raise refused(what, f"{exc}") from None


# --- a model call ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelCall:
    """What a call to a model may carry, as the policy decided it."""

    # The api_base's destination; None: the provider's own endpoint (LiteLLM's default).
    destination: Destination | None
    # The variable whose value jury passes as the key; None: no key of jury's.
    key_variable: str | None
    # Whether jury passes a key itself (the key, or a placeholder one) so that LiteLLM reads
    # none of the provider's variables; False: LiteLLM reads its own, for its own endpoint.
    explicit_key: bool
    # A provider variable not sent to this api_base (a placeholder key goes instead).
    withheld: str | None
    # Every variable whose value the call's requests carry: each request is checked for them.
    carried: tuple[str, ...]


def plan_model_call(
    policy: EgressPolicy,
    what: str,
    provider: str,
    api_base: str | None,
    api_key_env: str | None,
    placeholders: Sequence[str] = (),
) -> ModelCall:
    """Where a judge's (or LLM candidate's) call may go and with which key; EgressRefused
    says why it may not. `api_base`, `api_key_env`: expanded; `placeholders`: the variables
    expanded into its model and api_base. The addresses a name resolves to are checked at
    each request (jury.worker.calls.egress_guard), as is the host of a provider's own
    endpoint, which LiteLLM may take from its own settings."""
    keys = PROVIDERS.get(provider)
    if api_base:
        dest: Destination | None = checked_destination(api_base, f"{what}: api_base")
        assert dest is not None
        if not policy.needs_resolving(dest):
            problem = policy.reach_problem(dest)
            if problem:
                raise refused(f"{what}: api_base", problem)
    elif keys is not None and keys.hosts:
        # The provider's own API host, for what goes there (its scheme is LiteLLM's).
        dest = destination(f"https://{keys.hosts[0]}")
    else:
        dest = None
    for variable in placeholders:
        problem = policy.variable_problem(variable, dest)
        if problem:
            raise refused(what, problem)
    if api_key_env:
        if keys is None and dest is None:
            raise refused(
                what,
                f"jury cannot tell where provider {provider!r} sends the key in {api_key_env}: "
                "give the judge an api_base",
            )
        unknown = policy.key_rules(api_key_env) is None
        problem = policy.key_problem(api_key_env, dest) if dest or unknown else None
        if problem:
            raise refused(what, problem)
        return ModelCall(dest, api_key_env, True, None, (*placeholders, api_key_env))
    if keys is None:
        if api_base:
            raise refused(
                what,
                f"jury does not know which credentials LiteLLM sends to an api_base for "
                f"provider {provider!r}; for an OpenAI-compatible server, name the model "
                "openai/<model>",
            )
        return ModelCall(None, None, False, None, tuple(placeholders))
    variable = keys.variables[0]
    if not api_base:  # LiteLLM reads its own variable, for its own endpoint
        return ModelCall(dest, None, False, None, (*placeholders, variable))
    if policy.key_problem(variable, dest) is None:
        return ModelCall(dest, variable, True, None, (*placeholders, variable))
    return ModelCall(dest, None, True, variable, tuple(placeholders))


def plan_endpoint_call(
    policy: EgressPolicy, what: str, url: str, carried: Sequence[str]
) -> Destination:
    """Where an HTTP endpoint candidate's call goes (EgressRefused when it may not): its URL
    (expanded) may be reached, and every variable its URL and headers took may go there.
    The addresses a name resolves to are checked at the request."""
    dest = checked_destination(url, f"{what}: url")
    problem = policy.carried_problem(carried, dest)
    if problem is None and not policy.needs_resolving(dest):
        problem = policy.reach_problem(dest)
    if problem:
        raise refused(what, problem)
    return dest
