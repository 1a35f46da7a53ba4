#!/usr/bin/env bash
# Installs what the test suite needs: ZooKeeper (Debian package), storm-py with its test extras.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -f /usr/share/java/zookeeper.jar ]; then
  export DEBIAN_FRONTEND=noninteractive
  as_root=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "error: installing the zookeeper package needs root or sudo" >&2; exit 1; }
    as_root=(sudo -E)
  fi
  "${as_root[@]}" apt-get update -q
  "${as_root[@]}" apt-get install -y -q zookeeper
fi
python3 -m pip install -q -e '.[test]'
