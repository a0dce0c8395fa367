"""Simulator settings: one frozen dataclass, buildable in code or from command-line options."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from jury.simulator.hostile import HOSTILE_KINDS, parse_hostile

ANSWER_FORMATS: tuple[str, ...] = ("json", "fenced", "tag", "plain")


@dataclass(frozen=True)
class SimulatorConfig:
    """Everything the server needs; the defaults give a fast, well-behaved judge."""

    host: str = "127.0.0.1"
    port: int = 8011  # 0 asks the OS for a free port (reported through ready_file).
    seed: int = 0
    latency_ms: float = 0.0  # Median of a lognormal latency; 0 means answer immediately.
    latency_sigma: float = 0.3
    # Added per completion token after the answer is chosen, as a model's decoding time.
    ms_per_token: float = 0.0
    rpm: int = 0  # Requests per minute per model; 0 means unlimited.
    model_rpm: Mapping[str, int] = field(default_factory=dict)
    error_rate: float = 0.0
    garbage_rate: float = 0.0
    timeout_rate: float = 0.0
    hang_seconds: float = 30.0
    # The quota is enforced over this window: rpm × window / 60 requests per window. 60 s is
    # a plain per-minute limit; providers often quantize (e.g. per second), which punishes
    # bursts that a per-minute window lets through.
    rate_window_s: float = 60.0
    down: frozenset[str] = frozenset()
    formats: tuple[str, ...] = ("json",)
    ready_file: str | None = None
    # Residual noise at temperature 0, in temperature units (see simulator.personas): the
    # noise is scaled by max(temperature, floor). None keeps each persona's own floor (0 for
    # the built-ins: deterministic at temperature 0); model_t0_noise sets it per model name
    # or persona, and wins over t0_noise.
    t0_noise: float | None = None
    model_t0_noise: Mapping[str, float] = field(default_factory=dict)
    # How far a bias group (`persona:group@tag`) misjudges an item, as a standard deviation in
    # fractions of the scale: the error its judges share (simulator.personas.group_shift).
    group_error: float = 0.2
    # Hostile behaviour per model name or persona (simulator.hostile): model -> kinds.
    hostile: Mapping[str, frozenset[str]] = field(default_factory=dict)
    trickle_ms: float = 50.0  # with `trickle`: the gap between two bytes of an answer
    huge_answer_chars: int = 2_000_000  # with `huge-answer`: the answer's length
    # The files and batches endpoints (simulator.batches): where batches are kept (across a
    # restart), how long one takes, the share of its lines that fail, when it expires (0: never).
    batch_dir: str | None = None
    batch_delay_s: float = 2.0
    batch_error_rate: float = 0.0
    batch_expire_s: float = 0.0
    # A slow answer to the first batch creation (after the batch is kept) and to the first file
    # download: the windows in which a test kills the worker that submits or reads a batch.
    batch_create_delay_s: float = 0.0
    batch_file_delay_s: float = 0.0
    # A scripted judge (a documented example reproduced): model name -> the scores its answers
    # give, in turn, per criterion (the k-th answer on a criterion is script[k % len]).
    scripts: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Freeze the mapping too, so a config shared between handlers cannot drift.
        object.__setattr__(self, "model_rpm", MappingProxyType(dict(self.model_rpm)))
        object.__setattr__(self, "scripts", MappingProxyType(dict(self.scripts)))
        object.__setattr__(self, "model_t0_noise", MappingProxyType(dict(self.model_t0_noise)))
        object.__setattr__(self, "down", frozenset(self.down))
        object.__setattr__(self, "formats", tuple(self.formats))
        hostile = {name: frozenset(kinds) for name, kinds in self.hostile.items()}
        object.__setattr__(self, "hostile", MappingProxyType(hostile))
        self._validate()

    def _validate(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        if self.latency_ms < 0 or self.latency_sigma < 0 or self.ms_per_token < 0:
            raise ValueError("latency_ms, latency_sigma and ms_per_token must be >= 0")
        if self.hang_seconds < 0:
            raise ValueError("hang_seconds must be >= 0")
        if not 0 < self.rate_window_s <= 60:
            raise ValueError("rate_window_s must be in (0, 60]")
        if self.rpm < 0 or any(limit < 0 for limit in self.model_rpm.values()):
            raise ValueError("rpm limits must be >= 0")
        for name in ("error_rate", "garbage_rate", "timeout_rate"):
            rate = getattr(self, name)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {rate}")
        floors = [*self.model_t0_noise.values(), self.t0_noise or 0.0]
        if any(not 0.0 <= floor <= 2.0 for floor in floors):
            raise ValueError("t0_noise floors must be temperatures in [0, 2]")
        if not 0.0 <= self.group_error <= 1.0:
            raise ValueError("group_error must be a fraction of the scale in [0, 1]")
        if not self.formats:
            raise ValueError("formats must name at least one answer format")
        unknown_kinds = {k for kinds in self.hostile.values() for k in kinds} - set(HOSTILE_KINDS)
        if unknown_kinds:
            raise ValueError(f"unknown hostile kinds {sorted(unknown_kinds)}: {HOSTILE_KINDS}")
        if self.trickle_ms <= 0 or self.huge_answer_chars <= 0:
            raise ValueError("trickle_ms and huge_answer_chars must be > 0")
        unknown = [fmt for fmt in self.formats if fmt not in ANSWER_FORMATS]
        if unknown:
            raise ValueError(f"unknown answer formats {unknown}; choose from {ANSWER_FORMATS}")

    def rpm_for(self, model: str, persona: str) -> int:
        """The limit for a model: its full name wins over its persona, then the global limit."""
        if model in self.model_rpm:
            return self.model_rpm[model]
        if persona in self.model_rpm:
            return self.model_rpm[persona]
        return self.rpm

    def t0_noise_for(self, model: str, persona: str) -> float | None:
        """The noise floor for a model: its full name, then its persona, then the global
        setting; None leaves the persona's own."""
        if model in self.model_t0_noise:
            return self.model_t0_noise[model]
        if persona in self.model_t0_noise:
            return self.model_t0_noise[persona]
        return self.t0_noise

    def is_down(self, model: str, persona: str) -> bool:
        return model in self.down or persona in self.down

    def hostile_for(self, model: str, persona: str) -> frozenset[str]:
        """The hostile kinds of a model: its full name's, else its persona's."""
        if model in self.hostile:
            return self.hostile[model]
        return self.hostile.get(persona, frozenset())


def _probability(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1], got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def _model_limit(text: str) -> tuple[str, int]:
    name, sep, limit = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=N, got {text!r}")
    return name, _non_negative_int(limit)


def _t0_noise(text: str) -> tuple[str, float]:
    """`F` (every model; name "") or `NAME=F` (a model name or persona)."""
    name, _, value = text.rpartition("=")
    try:
        floor = float(value)
    except ValueError:
        floor = -1.0
    if not 0.0 <= floor <= 2.0:
        raise argparse.ArgumentTypeError(
            f"expected a temperature in [0, 2] or NAME=temperature, got {text!r}"
        )
    return name, floor


def _script(text: str) -> tuple[str, tuple[float, ...]]:
    """`MODEL=6,7,6.5`: the scores the model's answers give, in turn."""
    name, sep, values = text.rpartition("=")
    try:
        scores = tuple(float(v) for v in values.split(","))
    except ValueError:
        scores = ()
    if not sep or not name or not scores:
        raise argparse.ArgumentTypeError(f"expected MODEL=score,score,…, got {text!r}")
    return name, scores


def _hostile(text: str) -> tuple[str, str]:
    try:
        return parse_hostile(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, got {text!r}") from None


def _formats(text: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [fmt for fmt in chosen if fmt not in ANSWER_FORMATS]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(
            f"expected a comma list from {','.join(ANSWER_FORMATS)}, got {text!r}"
        )
    return chosen


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        # How it is run: `jury simulate` (which runs `python -m jury.simulator`, the same).
        prog="jury simulate",
        description="OpenAI-compatible fake judge server with personas, latency and faults "
        "(also `python -m jury.simulator`).",
    )
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    add("--port", type=int, default=8011, help="port to listen on; 0 picks a free one")
    add("--seed", type=int, default=0, help="seed for latent quality and noise (default 0)")
    add("--latency-ms", type=_non_negative_float, default=0.0, help="median latency in ms")
    add("--latency-sigma", type=_non_negative_float, default=0.3, help="lognormal sigma")
    add(
        "--ms-per-token",
        type=_non_negative_float,
        default=0.0,
        help="extra latency per completion token, in ms (decoding time; default 0)",
    )
    add("--rpm", type=_non_negative_int, default=0, help="requests/minute per model, 0 = no limit")
    add(
        "--model-rpm",
        type=_model_limit,
        action="append",
        default=[],
        metavar="NAME=N",
        help="per-model limit; NAME is a full model name or a persona (repeatable)",
    )
    add("--error-rate", type=_probability, default=0.0, help="probability of a 500/502/503")
    add("--garbage-rate", type=_probability, default=0.0, help="probability of unparseable text")
    add("--timeout-rate", type=_probability, default=0.0, help="probability of hanging first")
    add("--hang-seconds", type=_non_negative_float, default=30.0, help="how long a hang lasts")
    add(
        "--rate-window",
        type=float,
        default=60.0,
        help="seconds over which rpm is enforced, as rpm*window/60 requests (default 60)",
    )
    add(
        "--down",
        action="append",
        default=[],
        metavar="MODEL",
        help="model name or persona that always answers 503 (repeatable)",
    )
    add(
        "--formats",
        type=_formats,
        default=("json",),
        help="comma list of answer formats to pick from: json,fenced,tag,plain (default json)",
    )
    add(
        "--t0-noise",
        type=_t0_noise,
        action="append",
        default=[],
        metavar="[NAME=]T",
        help="noise floor in temperature units: noise scales with max(temperature, T), so a "
        "judge is not deterministic at temperature 0; NAME is a model name or persona "
        "(repeatable; default 0: deterministic)",
    )
    add(
        "--script",
        type=_script,
        action="append",
        default=[],
        metavar="MODEL=S1,S2,…",
        help="a scripted judge: the model's answers on each criterion give these scores in "
        "turn (repeatable; the model must still name a persona)",
    )
    add(
        "--group-error",
        type=_non_negative_float,
        default=0.2,
        help="standard deviation, as a fraction of the scale, of the misjudgement shared by the "
        "judges of one bias group (model name persona:group@tag; default 0.2)",
    )
    add(
        "--hostile",
        type=_hostile,
        action="append",
        default=[],
        metavar="MODEL=KIND",
        help="misbehave for a model name or persona (repeatable): " + ", ".join(HOSTILE_KINDS),
    )
    add("--trickle-ms", type=float, default=50.0, help="with trickle: ms between answer bytes")
    add(
        "--huge-answer-chars",
        type=int,
        default=2_000_000,
        help="with huge-answer: characters in the answer",
    )
    add(
        "--batch-dir",
        default=None,
        metavar="PATH",
        help="keep uploaded files and batches here, across restarts (default: a temporary dir)",
    )
    add(
        "--batch-delay",
        type=_non_negative_float,
        default=2.0,
        help="seconds a batch takes to complete, at least (default 2)",
    )
    add(
        "--batch-error-rate",
        type=_probability,
        default=0.0,
        help="probability that a batch line fails with a 500 (in the error file)",
    )
    add(
        "--batch-expire",
        type=_non_negative_float,
        default=0.0,
        help="seconds after which an unfinished batch expires (default 0: never)",
    )
    add(
        "--batch-create-delay",
        type=_non_negative_float,
        default=0.0,
        help="seconds to wait before answering the first batch creation, once it is kept",
    )
    add(
        "--batch-file-delay",
        type=_non_negative_float,
        default=0.0,
        help="seconds to wait before sending the first file content asked for",
    )
    add("--ready-file", default=None, metavar="PATH", help="write the bound port here once up")
    return parser


def parse_config(argv: Sequence[str] | None = None) -> SimulatorConfig:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return SimulatorConfig(
            host=args.host,
            port=args.port,
            seed=args.seed,
            latency_ms=args.latency_ms,
            latency_sigma=args.latency_sigma,
            ms_per_token=args.ms_per_token,
            rpm=args.rpm,
            model_rpm=dict(args.model_rpm),
            error_rate=args.error_rate,
            garbage_rate=args.garbage_rate,
            timeout_rate=args.timeout_rate,
            hang_seconds=args.hang_seconds,
            rate_window_s=args.rate_window,
            down=frozenset(args.down),
            formats=args.formats,
            ready_file=args.ready_file,
            t0_noise=next((f for name, f in reversed(args.t0_noise) if not name), None),
            model_t0_noise={name: f for name, f in args.t0_noise if name},
            group_error=args.group_error,
            hostile=_hostile_map(args.hostile),
            trickle_ms=args.trickle_ms,
            huge_answer_chars=args.huge_answer_chars,
            batch_dir=args.batch_dir,
            batch_delay_s=args.batch_delay,
            batch_error_rate=args.batch_error_rate,
            batch_expire_s=args.batch_expire,
            batch_create_delay_s=args.batch_create_delay,
            batch_file_delay_s=args.batch_file_delay,
            scripts=dict(args.script),
        )
    except ValueError as exc:
        parser.error(str(exc))


def _hostile_map(pairs: Sequence[tuple[str, str]]) -> dict[str, frozenset[str]]:
    kinds: dict[str, set[str]] = {}
    for model, kind in pairs:
        kinds.setdefault(model, set()).add(kind)
    return {model: frozenset(found) for model, found in kinds.items()}
