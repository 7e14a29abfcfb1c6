"""infra/Dockerfile's structure (no engine builds it here): a build stage and a final stage that
has only the virtualenv, runs as a non-root user, carries the version, installs the extras that
exist, and copies what the repository has and the build context keeps."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "infra/Dockerfile").read_text()
BUILD_TOOLS = ("build-essential", "gcc", "g++", "make", "cmake", "clang")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for ins in instructions(DOCKERFILE):
        if ins[0] == "FROM":
            out.append([])
        if out:
            out[-1].append(ins)
    return out


def test_two_stages_and_the_final_one_has_nothing_to_build_with() -> None:
    build, final = stages()
    image = re.search(r"ARG PYTHON_IMAGE=(\S+)", DOCKERFILE)
    assert re.search(r"\bAS build\b", build[0][1]) and image is not None and "slim" in image.group(1)
    assert any(word == "RUN" and "pip install" in args for word, args in build)
    final_runs = " ".join(args for word, args in final if word == "RUN")
    assert "apt-get install" not in final_runs and "pip install" not in final_runs
    assert not any(tool in final_runs for tool in BUILD_TOOLS)
    copies = [args for word, args in final if word == "COPY"]
    assert copies == ["--from=build /opt/venv /opt/venv"]  # the virtualenv and nothing else


def test_the_final_stage_runs_as_a_numeric_non_root_user() -> None:
    final = stages()[-1]
    users = [args for word, args in final if word == "USER"]
    assert users and users[-1].split(":")[0].isdigit() and int(users[-1].split(":")[0]) != 0
    assert [w for w, _ in final].index("USER") > max(i for i, (w, _) in enumerate(final) if w in ("RUN", "COPY"))
    # the uid the Helm chart's securityContext runs with
    chart_uid = re.search(r"runAsUser: (\d+)", (REPO / "infra/helm/gpuledger/values.yaml").read_text())
    assert chart_uid and users[-1].split(":")[0] == chart_uid.group(1)


def test_the_version_label_and_the_extras() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    final = stages()[-1]
    labels = " ".join(args for word, args in final if word == "LABEL")
    assert 'org.opencontainers.image.version="${VERSION}"' in labels
    assert "ARG VERSION" in DOCKERFILE and '[ "${VERSION}" != "$(cat /opt/venv/gpuledger.version)" ]' in DOCKERFILE
    extras = re.search(r"ARG EXTRAS=(\S+)", DOCKERFILE)
    assert extras and extras.group(1) == "all" and "all" in project["optional-dependencies"]
    assert "--constraint requirements.lock" in DOCKERFILE


def test_what_the_build_copies_exists_and_the_context_keeps_it() -> None:
    ignored = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    build = stages()[0]
    sources = [src for word, args in build if word == "COPY" for src in args.split()[:-1]]
    assert {"pyproject.toml", "requirements.lock", "pipelines", "streams", "sql", "dagster_project"} <= set(sources)
    for src in sources:
        assert (REPO / src).exists(), src
        assert not any(fnmatch.fnmatch(src, pattern) for pattern in ignored), src
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {p.rstrip("*") for p in packages} <= set(sources)  # every package of the wheel reaches the build
