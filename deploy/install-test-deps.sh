#!/usr/bin/env bash
# Installs what the test suite needs: ZooKeeper, headless Chromium with its driver (Debian
# packages; the browser tests of the web UI drive Chromium through selenium), iproute2 (the
# multi-host test puts daemons in network namespaces), storm-py with its test extras.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
packages=()
[ -f /usr/share/java/zookeeper.jar ] || packages+=(zookeeper)
command -v chromium >/dev/null || packages+=(chromium)
command -v chromedriver >/dev/null || packages+=(chromium-driver)
command -v ip >/dev/null || [ -x /usr/sbin/ip ] || packages+=(iproute2)
if [ "${#packages[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  as_root=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "error: installing ${packages[*]} needs root or sudo" >&2; exit 1; }
    as_root=(sudo -E)
  fi
  "${as_root[@]}" apt-get update -q
  "${as_root[@]}" apt-get install -y -q "${packages[@]}"
fi
python3 -m pip install -q -e '.[test]'
