#!/usr/bin/env bash
# Installs the Debian packages specserve builds against (skips what is there).
# `setup.sh demo` installs only what tools/demo.sh needs: the build's
# libraries, the Python client's grpcio and curl; without it, everything the
# tests use too (clang for the fuzzers and the thread-safety check, Node.js
# and the openai npm package, prometheus, kubectl, python3-jsonschema for the
# structured-output checks).
set -euo pipefail
mode=${1:-all}
pkgs=(build-essential cmake ninja-build ccache pkg-config git
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
      libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libcpp-httplib-dev libicu-dev python3 python3-grpcio python3-protobuf curl)
if [ "$mode" != demo ]; then
  pkgs+=(python3-venv python3-setuptools python3-yaml yamllint
         prometheus python3-prometheus-client python3-jinja2 gnuplot-nox
         clang-14 libclang-rt-14-dev python3-jsonschema)
fi
# The deploy checks render the manifests with `kubectl kustomize`: Debian's
# kubectl (kubernetes-client) unless a kubectl is already installed (another
# package's /usr/bin/kubectl would conflict with it).
[ "$mode" = demo ] || command -v kubectl >/dev/null 2>&1 || pkgs+=(kubernetes-client)
# The HTTP API's end-to-end test drives it with the openai npm package:
# Debian's nodejs and npm unless a node is already installed (another
# vendor's nodejs package bundles npm and conflicts with Debian's).
if [ "$mode" != demo ]; then
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi
# python3-venv and python3-setuptools: `pip install clients/python` (the
# Python client package) builds offline in a venv with Debian's setuptools;
# protobuf-compiler-grpc's grpc_python_plugin generates its gRPC modules.
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The openai client at the version tests/http/package-lock.json pins, in
# tests/http/node_modules (git-ignored).
[ "$mode" = demo ] && exit 0
http_tests=$(cd "$(dirname "$0")/../tests/http" && pwd)
if [ ! -f "$http_tests/node_modules/openai/package.json" ]; then
  echo "setup: installing the openai npm package in tests/http"
  (cd "$http_tests" && npm ci --no-audit --no-fund --loglevel=error)
fi
