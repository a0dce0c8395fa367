"""jury installs the ordinary Python way: one import name, a wheel that works anywhere, and
commands that files in the current folder cannot hijack."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import psutil
import pytest
import redis

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

# Hostile files a user may well have in their folder: if jury imported any of them, the marker
# would be written and the command would exit 99.
HIJACKERS = ("worker.py", "schemas.py", "celery.py", "jury.py", "producer.py", "store.py")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel .` builds from this checkout, offline (no build isolation)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            str(out),
            str(ROOT),
        ],
        check=True,
        timeout=180,
        capture_output=True,
    )
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_holds_one_package_and_its_data(wheel: Path) -> None:
    assert wheel.name.startswith("jury_panel-")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert top - dist_info == {"jury"}, f"top-level entries other than jury: {top}"
    for data in ("jury/examples/demo.yaml", "jury/examples/demo_items.jsonl", "jury/py.typed"):
        assert data in names
    (metadata_name,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    entry_points = zipfile.ZipFile(wheel).read(metadata_name).decode()
    assert "jury = jury.cli.main:main" in entry_points
    # The metadata an index shows: the name to publish under, keywords, classifiers.
    (metadata_file,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    metadata = zipfile.ZipFile(wheel).read(metadata_file).decode()
    assert "Name: jury-panel\n" in metadata and "Requires-Python: >=3.11" in metadata
    assert "Keywords: llm" in metadata and "Classifier: Typing :: Typed" in metadata


def _fresh_environment(folder: Path, wheel: Path) -> Path:
    """A new virtual environment with the wheel installed and, offline, the dependencies that
    .venv already has (its site-packages as a plain path entry: .venv's own editable jury
    finder is a .pth there, which a plain path entry does not run)."""
    env_dir = folder / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120
    )
    python = env_dir / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        timeout=180,
        capture_output=True,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(
        "\n".join(p for p in site.getsitepackages() if "site-packages" in p) + "\n"
    )
    return env_dir


def _processes_mentioning(marker: str) -> list[str]:
    """The command lines of running processes that contain `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if marker in cmdline:
            found.append(cmdline)
    return found


def test_installed_wheel_runs_the_demo_where_the_folder_holds_hijackers(
    wheel: Path, tmp_path: Path, redis_url: str
) -> None:
    """`make demo`'s promise, as a user who installed the wheel keeps it: `jury demo` from a
    folder holding nothing of jury's but files named like the modules it imports (which it
    must not import), leaving no process behind. One demo run covers all three: each run costs
    ~15 s of CPU on the 2-core machine, and the suite ran it three times."""
    env_dir = _fresh_environment(tmp_path, wheel)
    folder = tmp_path / "project"
    folder.mkdir()
    marker = tmp_path / "hijacked"
    for name in HIJACKERS:
        (folder / name).write_text(
            f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\nraise SystemExit(99)\n"
        )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {
        "JURY_BROKER_URL": redis_url,
        "JURY_DATABASE_URL": f"sqlite:///{folder / 'jury.db'}",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "COLUMNS": "160",
    }
    where = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import jury; print(jury.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(env_dir)), f"jury imported from {where}, not the installed wheel"
    demo = subprocess.Popen(
        [str(env_dir / "bin" / "jury"), "demo"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = demo.communicate(timeout=240)
    hijacked = marker.read_text() if marker.exists() else ""
    assert hijacked == "", f"jury imported the folder's {hijacked!r}"
    assert demo.returncode == 0, output[-3000:]
    assert "results are stored in" in output
    assert "completed; 24 verdicts" in output
    assert "relevance" in output, "the verdict table names the demo's dimensions"
    assert "⚑ review" in output  # the panel disagrees somewhere, visibly
    assert _processes_mentioning(str(env_dir)) == [], "the demo left a process running"
    # The demo's worker is named, and its simulator's ready-file is named, after its pid.
    assert _processes_mentioning(f"jury-demo-{demo.pid}") == []
    assert _processes_mentioning(f"simulator-{demo.pid}-") == []
    # Nor a key of its private queues (each run left 18 `_kombu.binding*.jury-demo-…`), nor
    # of its deployment (its batch's mark and meter, its worker's heartbeat and locks).
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    leftover = [str(key) for key in client.keys(f"*jury-demo-{demo.pid}*")]
    client.close()
    assert leftover == []
    version = subprocess.run(
        [str(env_dir / "bin" / "jury"), "--version"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert version.startswith("jury 0.") and "celery" in version
