#!/usr/bin/env bash
# Installs what the test suite needs: ZooKeeper, headless Chromium with its driver (Debian
# packages; the browser tests of the web UI drive Chromium through selenium), iproute2 (the
# multi-host test puts daemons in network namespaces), redis-server (the redis state provider's
# tests start servers of their own), storm-py with its test extras.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
packages=()
[ -f /usr/share/java/zookeeper.jar ] || packages+=(zookeeper)
command -v chromium >/dev/null || packages+=(chromium)
command -v chromedriver >/dev/null || packages+=(chromium-driver)
command -v ip >/dev/null || [ -x /usr/sbin/ip ] || packages+=(iproute2)
command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || packages+=(redis-server)
# The Debian packages install while pip builds storm-py's compiled core (neither needs the
# other): on a fresh machine the two took a minute and a half one after the other.
apt_pid=
if [ "${#packages[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  as_root=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "error: installing ${packages[*]} needs root or sudo" >&2; exit 1; }
    as_root=(sudo -E)
  fi
  policy=/usr/sbin/policy-rc.d
  with_redis=; [[ " ${packages[*]} " == *" redis-server "* ]] && with_redis=1
  if [ -n "$with_redis" ] && [ ! -e "$policy" ]; then
    # The tests run redis-servers of their own on free ports: keep the package from starting a
    # system one that would stay on port 6379 (policy-rc.d exit 101: "action forbidden"; it
    # covers this install only and is removed when this script exits).
    printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee "$policy" >/dev/null
    "${as_root[@]}" chmod 755 "$policy"
    trap '"${as_root[@]}" rm -f "$policy"' EXIT
  fi
  (
    "${as_root[@]}" apt-get update -q
    "${as_root[@]}" apt-get install -y -q "${packages[@]}"
    if [ -n "$with_redis" ] && command -v systemctl >/dev/null; then
      # nor at the next boot (disable works without a running systemd), nor now had a policy let it
      "${as_root[@]}" systemctl disable redis-server >/dev/null 2>&1 || true
      [ ! -d /run/systemd/system ] || "${as_root[@]}" systemctl stop redis-server >/dev/null 2>&1 || true
    fi
  ) &
  apt_pid=$!
fi
pip_status=0
python3 -m pip install -q -e '.[test]' || pip_status=$?
[ -z "$apt_pid" ] || wait "$apt_pid"  # its own failure stops the script here (set -e)
exit "$pip_status"
