#!/usr/bin/env bash
# Make sure a Docker engine answers. Used by .ci/run and by the Makefile (demo, replay, test,
# images, ci-repro), so that a fresh Debian machine needs nothing installed by hand.
#
#   images/provision-docker.sh            provision when needed (nothing to do if one answers)
#   images/provision-docker.sh --dry-run  print the decision and the commands, run nothing
#
# The decision (printed first with --dry-run, as `decision: ...`):
#   engine-answers  `docker info` answers at $DOCKER_HOST (or the default socket): nothing to do.
#   provision       no engine answers, we are root on a Debian-like system and DOCKER_HOST is
#                   unset or a unix socket: install Debian's docker.io when dockerd or the
#                   docker client is missing, start dockerd, wait until it answers.
#   cannot          anything else: one line saying how to start an engine, exit 1.
#
# SANDBOX_OS_RELEASE (default /etc/os-release) is the file read to tell a Debian-like system;
# SANDBOX_DOCKERD_WAIT (default 60) is how many seconds to wait for the engine.
set -euo pipefail

dry_run=0
case "${1:-}" in
  --dry-run) dry_run=1 ;;
  "") ;;
  *) echo "usage: $0 [--dry-run]" >&2; exit 2 ;;
esac

os_release="${SANDBOX_OS_RELEASE:-/etc/os-release}"
wait_seconds="${SANDBOX_DOCKERD_WAIT:-60}"
log="${TMPDIR:-/tmp}/sandbox-dockerd.log"
where="${DOCKER_HOST:-the default socket}"

server_version() {
  command -v docker >/dev/null 2>&1 || return 1
  timeout 20 docker version --format '{{.Server.Version}}' 2>/dev/null
}

debian_like() {
  [ -r "$os_release" ] || return 1
  command -v apt-get >/dev/null 2>&1 || return 1
  # shellcheck disable=SC1090
  (. "$os_release" && case " ${ID:-} ${ID_LIKE:-} " in *" debian "*) exit 0 ;; *) exit 1 ;; esac)
}

say() { echo "provision-docker: $*"; }
# The decision is printed with --dry-run; a real run is quiet when an engine answers.
decision() { [ "$dry_run" -eq 0 ] || echo "decision: $*"; }

# `run CMD...` runs a command, or with --dry-run only prints it.
run() {
  echo "run: $*"
  [ "$dry_run" -eq 1 ] || "$@"
}

if version="$(server_version)" && [ -n "$version" ]; then
  decision "engine-answers (Docker $version at $where)"
  exit 0
fi

why=""
if [ "$(id -u)" -ne 0 ]; then
  why="not root"
elif ! debian_like; then
  why="not a Debian-like system with apt-get"
elif [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST#unix://}" = "$DOCKER_HOST" ]; then
  why="DOCKER_HOST names a remote engine"
fi
if [ -n "$why" ]; then
  decision "cannot ($why)"
  echo "no Docker engine answers at $where and none can be provisioned here ($why): start one (\`sudo dockerd &\`, or \`sudo systemctl start docker\`), or set DOCKER_HOST" >&2
  exit 1
fi

decision "provision (root on a Debian-like system)"
say "no Docker engine answers at $where: provisioning one"
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(dockerd)
command -v docker >/dev/null 2>&1 || missing+=(docker)
if [ ${#missing[@]} -gt 0 ]; then
  say "${missing[*]} missing: installing Debian's docker.io"
  run apt-get update -qq
  run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io
fi

listen=()
[ -n "${DOCKER_HOST:-}" ] && listen=(-H "$DOCKER_HOST")
say "starting dockerd (log: $log)"
echo "run: nohup dockerd ${listen[*]} >$log 2>&1 &"
if [ "$dry_run" -eq 0 ]; then
  nohup dockerd "${listen[@]}" >"$log" 2>&1 &
fi
echo "run: wait up to $wait_seconds s until docker info answers"
[ "$dry_run" -eq 1 ] && exit 0

for _ in $(seq 1 "$wait_seconds"); do
  if version="$(server_version)" && [ -n "$version" ]; then
    say "Docker $version answers at $where"
    exit 0
  fi
  sleep 1
done
echo "dockerd did not answer within $wait_seconds s; its last log lines:" >&2
tail -20 "$log" >&2 || true
exit 1
