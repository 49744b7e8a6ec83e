#!/usr/bin/env bash
# Installs the system packages the project needs when they are missing: mosquitto (+ clients), Java 17, and
# Chromium (the test that opens report.html in a headless browser).
# Runs apt-get as root, or through sudo; without either it says what is missing and carries on (the tests
# that need a missing binary skip with that reason).
set -u
need=()
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need+=(mosquitto)
command -v mosquitto_sub >/dev/null 2>&1 || need+=(mosquitto-clients)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
  echo "warning: missing ${need[*]} and no root to install them; the tests that need them will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq && $sudo apt-get install -y -qq "${need[@]}" >/dev/null
