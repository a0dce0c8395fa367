"""OpenAI-compatible judge server for demos, tests and benchmarks (`python -m simulator`).

`latent_quality` is the ground truth the simulated judges score against; benchmarks import
it to measure how close a panel's verdicts come.
"""

from jury.simulator.config import SimulatorConfig
from jury.simulator.personas import PERSONAS, latent_quality

__all__ = ["PERSONAS", "SimulatorConfig", "latent_quality"]
