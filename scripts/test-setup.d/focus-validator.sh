#!/usr/bin/env bash
# The FinOps Foundation's FOCUS validator (focus-validator 2.2.1, FOCUS 1.2 rules bundled), which
# tests/integration/test_focus_validator.py runs on every chargeback file of the demo.
#
# It needs CPython 3.12 exactly: it requires Python >= 3.12 and pins numpy < 2, and numpy 1.26 has
# wheels up to 3.12 only; Debian 12 has 3.11. The interpreter is JavaCPP's CPython build, shipped
# inside the Maven Central jar org.bytedeco:cpython (fetched with the Maven the set-up already uses,
# checked against a pinned SHA-256). Everything lives outside the clone, under
# ${XDG_CACHE_HOME:-$HOME/.cache}/gpuledger/focus-validator:
#   python-<version>/   the interpreter (bin/python3.12)
#   venv/               a virtualenv with focus-validator and its dependencies at the versions below
# Idempotent: silent when both are current (a stamp holds the hash of everything below).
#
# Run it from the venv's site-packages directory: it reads focus_validator/rules/currency_codes.csv
# relative to the working directory. Pass --block-download: FOCUS 1.2 rules are bundled, and the
# option stops it from asking GitHub for rule files.
set -euo pipefail

PY_VERSION=3.12.1
ARTIFACT="org.bytedeco:cpython:${PY_VERSION}-1.5.10:jar:linux-x86_64"
JAR_SHA256=a135fcf4dc01adebf7ea439252276fc3196db80f7e0dd3da0b61f1ec489b68bd
# focus-validator declares loose ranges (pyarrow "*" now resolves to a release that needs numpy 2,
# which it cannot have): every package is pinned, and these were run together.
PINS="focus-validator==2.2.1
annotated-types==0.8.0
attrs==26.1.0
certifi==2026.10.19.post1
charset-normalizer==3.5.3
ddt==1.7.2
duckdb==1.5.6
graphviz==0.21
idna==3.20
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
multimethod==2.0.2
mypy_extensions==1.2.0
numpy==1.26.4
packaging==26.4
pandas==2.3.3
pandasql==0.7.3
pandera==0.26.1
polars==1.44.2
polars-runtime-32==1.44.2
pyarrow==25.0.1
pydantic==2.14.4
pydantic_core==2.50.5
python-dateutil==4.0.0
pytz==2025.2
PyYAML==6.0.4
referencing==0.37.0
requests==2.34.2
rpds-py==2026.9.1
SQLAlchemy==2.1.9
sqlglot==27.29.0
tabulate==0.10.0
typeguard==4.6.1
typing-inspect==0.9.0
typing-inspection==0.4.5
typing_extensions==4.16.0
tzdata==2026.6
urllib3==2.8.0"
BUILD_PINS="poetry-core==2.5.0
PyYAML==6.0.4"  # focus-validator is an sdist only; its build backend

home="${XDG_CACHE_HOME:-$HOME/.cache}/gpuledger/focus-validator"
prefix="$home/python-$PY_VERSION"
venv="$home/venv"
stamp="$home/.stamp"
want="$(printf '%s\n' "$ARTIFACT" "$JAR_SHA256" "$PINS" "$BUILD_PINS" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/focus-validator" ]; then
  exit 0
fi
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "setup: focus-validator skipped: its interpreter is pinned for Linux x86_64 only" >&2
  exit 0
fi
echo "setup: installing the FOCUS validator (CPython $PY_VERSION, focus-validator 2.2.1) into $home"
mkdir -p "$home"
work="$(mktemp -d "$home/.install.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# 1. the interpreter: the jar from Maven Central, its linux-x86_64 tree unpacked as a prefix
if [ ! -x "$prefix/bin/python3.12" ]; then
  if ! mvn -q -B -Dstyle.color=never dependency:copy -Dartifact="$ARTIFACT" -DoutputDirectory="$work" \
      >"$work/mvn.log" 2>&1; then
    cat "$work/mvn.log" >&2
    exit 1
  fi
  jar="$(ls "$work"/cpython-*.jar)"
  echo "$JAR_SHA256  $jar" | sha256sum --quiet -c -
  python3 - "$jar" "$work/prefix" <<'EOF'
import os, shutil, sys, zipfile
jar, dest = sys.argv[1], sys.argv[2]
root = "org/bytedeco/cpython/linux-x86_64/"
with zipfile.ZipFile(jar) as z:
    for info in z.infolist():
        if info.is_dir() or not info.filename.startswith(root):
            continue
        target = os.path.join(dest, info.filename[len(root):])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
EOF
  chmod 755 "$work"/prefix/bin/*
  # _ctypes needs libffi.so.7, which the jar keeps at the top of the tree; its RUNPATH looks in
  # lib/python3.12 ($ORIGIN/..) among others
  ln -s ../../libffi.so.7 "$work/prefix/lib/python3.12/libffi.so.7"
  "$work/prefix/bin/python3.12" -c 'import ctypes, ssl, sqlite3, lzma, bz2, zlib' >/dev/null
  rm -rf "$prefix" "$venv"  # a venv points at its interpreter's path
  mv "$work/prefix" "$prefix"
fi

# 2. the virtualenv, built afresh whenever the pins change
rm -rf "$venv"
"$prefix/bin/python3.12" -m venv "$venv"
printf '%s\n' "$PINS" >"$work/requirements.txt"
printf '%s\n' "$BUILD_PINS" >"$work/build-constraints.txt"
PIP_CONSTRAINT="$work/build-constraints.txt" "$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --no-deps -r "$work/requirements.txt"
"$venv/bin/python" -m pip check >"$work/check.log" || { cat "$work/check.log" >&2; exit 1; }
"$venv/bin/python" -c 'import focus_validator.main' >/dev/null
echo "$want" >"$stamp"
