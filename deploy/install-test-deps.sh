#!/usr/bin/env bash
# Installs what the test suite needs: ZooKeeper (Debian package), storm-py with its test extras.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -f /usr/share/java/zookeeper.jar ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q zookeeper
fi
python3 -m pip install -q -e '.[test]'
