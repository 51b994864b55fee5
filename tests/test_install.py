"""The package as a user installs it: a wheel built from source, in a clean virtual env.

No network: the wheel is built with this environment's setuptools (no build isolation)
and installed without dependencies; the clean environment finds the third-party
dependencies through PYTHONPATH pointing at a folder that holds only what
``pyproject.toml`` declares (the core ``dependencies`` and what they require, linked
from this environment), so a module that imports an undeclared package fails here as it
would after ``pip install trustroute``. The folder is not a site directory, so no
``.pth`` file is read from it: what is imported is the wheel's copy.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from dataclasses import dataclass
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "MANIFEST.in", "__init__.py", "router", "profiles",
           "integrations", "build_backend")


# Modules that need an optional extra (pyproject's optional-dependencies), so they are
# not imported with the core dependencies alone.
EXTRA_MODULES = {"trustroute.integrations.langgraph": "langgraph",
                 "trustroute.router.replay.plot": "plot",
                 "trustroute.router.report.charts": "plot"}


def declared_closure() -> set[str]:
    """Distributions ``pip install trustroute`` brings: the core dependencies and, with
    their markers evaluated here, everything they require (extras they name included)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [(Requirement(text), "") for text in project["dependencies"]]
    seen: set[tuple[str, str]] = set()  # (distribution, extra)
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        for wanted in ("", *sorted(req.extras)):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            todo.extend((Requirement(t), wanted) for t in distribution(name).requires or [])
    return {name for name, _ in seen}


def link_declared(folder: Path) -> Path:
    """``folder`` holding links to the top-level entries of every declared distribution."""
    folder.mkdir()
    for name in declared_closure():
        dist = distribution(name)
        assert dist.files is not None, f"{name} lists no files"
        for top in {f.parts[0] for f in dist.files if not f.parts[0].startswith("..")}:
            target = Path(str(dist.locate_file(top)))
            if target.exists() and not (folder / top).exists():
                (folder / top).symlink_to(target)
    return folder


@dataclass(frozen=True)
class CleanEnv:
    wheel: Path
    python: Path
    site_packages: Path
    workdir: Path  # an empty folder to run in, so nothing is imported from the cwd
    dependencies: Path  # the declared dependencies only (``link_declared``)

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {"PYTHONPATH": str(self.dependencies), "PATH": "/usr/bin:/bin",
               "PYTHONDONTWRITEBYTECODE": "1"}
        return subprocess.run([str(self.python), *args], cwd=cwd or self.workdir, env=env,
                              capture_output=True, text=True, timeout=120, check=False)


def run(*args: str | Path, cwd: Path) -> None:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="module")
def clean_env(tmp_path_factory: pytest.TempPathFactory) -> CleanEnv:
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"  # a copy, so the build leaves nothing in the working tree
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "--no-index", "-w", tmp / "wheels", src, cwd=tmp)
    (wheel,) = (tmp / "wheels").glob("trustroute-*.whl")
    run(sys.executable, "-m", "venv", "--without-pip", tmp / "venv", cwd=tmp)
    python = tmp / "venv" / "bin" / "python"
    # this environment's pip installs into the new one (--python): no pip bootstrap there
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
        "--no-index", wheel, cwd=tmp)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip()
    workdir = tmp / "empty"
    workdir.mkdir()
    return CleanEnv(wheel, python, Path(site), workdir, link_declared(tmp / "dependencies"))


def test_the_wheel_holds_only_trustroute(clean_env: CleanEnv) -> None:
    names = zipfile.ZipFile(clean_env.wheel).namelist()
    top = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert top == {"trustroute"}
    assert "trustroute/router/stats.py" in names
    assert not any(n.startswith(("trustroute/tests/", "trustroute/benchmarks/")) for n in names)


PROBE = """\
import json
import trustroute
import trustroute.router.cli.app
import trustroute.integrations.langchain
missing = {}
for name in ("router", "profiles", "integrations"):
    try:
        __import__(name)
        missing[name] = None
    except ImportError as exc:
        missing[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"trustroute": trustroute.__file__, "missing": missing}))
"""


@pytest.fixture(scope="module")
def probe(clean_env: CleanEnv) -> dict[str, Any]:
    done = clean_env.run("-c", PROBE)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


ALL_MODULES = """\
import importlib, json, pkgutil, sys
import trustroute
extras = set(sys.argv[1:])
failed = {}
for module in pkgutil.walk_packages(trustroute.__path__, "trustroute."):
    if module.name not in extras:
        try:
            importlib.import_module(module.name)
        except Exception as exc:
            failed[module.name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(failed))
"""


def test_every_module_imports_with_the_declared_dependencies_only(clean_env: CleanEnv
                                                                  ) -> None:
    # what `pip install trustroute` gives a user: a module that imports a package only
    # the dev extra brings (as scipy once was) fails here
    done = clean_env.run("-c", ALL_MODULES, *EXTRA_MODULES)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}
    cli = clean_env.run(str(clean_env.python.parent / "trustroute"), "--help")
    assert cli.returncode == 0, cli.stderr
    assert "Usage: trustroute" in cli.stdout


def test_the_dependency_folder_lacks_what_only_extras_bring(clean_env: CleanEnv) -> None:
    # the check above can fail: packages of the dev and plot extras are not there
    done = clean_env.run("-c", "import pytest")
    assert "No module named 'pytest'" in done.stderr
    done = clean_env.run("-c", "import trustroute.router.replay.plot")
    assert "No module named 'matplotlib'" in done.stderr


def test_import_trustroute_uses_the_installed_copy(clean_env: CleanEnv,
                                                   probe: dict[str, Any]) -> None:
    # the wheel's copy, not the editable install of the project's own environment
    assert Path(probe["trustroute"]).is_relative_to(clean_env.site_packages)


@pytest.mark.parametrize("name", ["router", "profiles", "integrations"])
def test_no_other_top_level_name_is_installed(probe: dict[str, Any], name: str) -> None:
    assert probe["missing"][name] == f"ModuleNotFoundError: No module named '{name}'"


APP = {
    "router.py": "ROUTES = ['/health', '/tasks']\n",
    "profiles/__init__.py": "USERS = {'ada': 'admin'}\n",
    "main.py": """\
import json
import sys

from trustroute import AgentRouter  # first, so that it cannot shadow the app's modules

import profiles
import router
from profiles import USERS

agents = AgentRouter(["researcher", "writer"], store="mem://")
decision = agents.select("summarise")
agents.record(decision, success=True, quality=0.9)
print(json.dumps({
    "routes": router.ROUTES, "users": USERS, "agent": decision.agent_id,
    "router": router.__file__, "profiles": profiles.__file__,
    "trustroute": sys.modules["trustroute"].__file__,
}))
""",
}


def test_an_app_with_its_own_router_and_profiles(clean_env: CleanEnv, tmp_path: Path) -> None:
    for rel, text in APP.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    done = clean_env.run("main.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["routes"] == ["/health", "/tasks"] and seen["users"] == {"ada": "admin"}
    assert seen["agent"] in ("researcher", "writer")
    assert Path(seen["router"]) == tmp_path / "router.py"
    assert Path(seen["profiles"]) == tmp_path / "profiles" / "__init__.py"
    assert Path(seen["trustroute"]).is_relative_to(clean_env.site_packages)


def test_an_editable_install_prints_no_setuptools_notice(clean_env: CleanEnv,
                                                          tmp_path: Path) -> None:
    # `pip install -e .` (what `make` runs) through the project's build backend: setuptools'
    # "Editable installation ... same name as your package" notice is gone, and the
    # editable install imports the source folder
    src = clean_env.wheel.parents[1] / "src"
    run(sys.executable, "-m", "venv", "--without-pip", tmp_path / "venv", cwd=tmp_path)
    python = tmp_path / "venv" / "bin" / "python"
    env = {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-build-isolation", "--no-index", "-e", str(src)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "Building editable for trustroute" in said  # the build ran and spoke
    assert "Editable installation" not in said and "same name" not in said, said
    found = subprocess.run(  # where `import trustroute` would load it from (no deps here)
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('trustroute').origin)"],
        cwd=clean_env.workdir, capture_output=True, text=True, check=True)
    assert Path(found.stdout.strip()) == src / "__init__.py"
