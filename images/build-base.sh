#!/usr/bin/env bash
# Build the Debian base image without any registry: debootstrap a minimal bookworm tree and
# `docker import` it. Skips the work when the image already exists.
set -euo pipefail
IMAGE="${1:-sandbox-replayer/base:bookworm}"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE: present, not rebuilt"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "installing debootstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
ROOT="$(mktemp -d)"
trap 'rm -rf "$ROOT"' EXIT
echo "base image $IMAGE: debootstrap bookworm (about a minute)"
debootstrap --variant=minbase bookworm "$ROOT" >/dev/null
tar -C "$ROOT" -c . | docker import - "$IMAGE" >/dev/null
echo "base image $IMAGE: built"
