#!/usr/bin/env bash
# The Python client as a package: `pip install clients/python` into a fresh
# venv (offline, with Debian's setuptools, grpcio and protobuf) must build the
# gRPC modules and install `specserve` with its command line, importable with
# no protoc in sight; the checkout's specserve_client.py must still work
# without the package. No servers needed. Exit 77 (skipped) when a build
# input is missing, except under CI=true, where that is a failure.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
require_python_package_tools
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { deploy_log "FAIL: $*"; exit 1; }

install_python_package "$work" || fail "pip install clients/python"
venv=$work/venv

# 1. Installed with its generated modules: imports with a PATH holding only
#    the venv (no protoc), from outside the checkout.
(cd "$work" && env -i HOME="$work" PATH="$venv/bin" "$venv/bin/python" - "$venv" <<'EOF'
import dataclasses, os, sys
import grpc
import specserve
from specserve import errors
from specserve.v1 import generation_pb2, generation_pb2_grpc

venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(specserve.__file__).startswith(venv), specserve.__file__
pkg = os.path.dirname(specserve.__file__)
for f in ("py.typed", "v1/generation_pb2.py", "v1/generation_pb2.pyi", "v1/generation_pb2_grpc.py",
          "_grpc_health/v1/health_pb2.py"):
    assert os.path.isfile(os.path.join(pkg, f)), f
assert specserve.__version__ == "0.1.0", specserve.__version__
assert hasattr(generation_pb2_grpc, "GenerationStub")
for cls in (specserve.GenerationResult, specserve.Stats, specserve.Delta, specserve.ModelInfo):
    assert dataclasses.is_dataclass(cls), cls
# Every GenerationStats field has a Stats field of the same name.
proto_fields = {f.name for f in generation_pb2.GenerationStats.DESCRIPTOR.fields}
missing = proto_fields - {f.name for f in dataclasses.fields(specserve.Stats)}
assert not missing, "Stats lacks %s" % sorted(missing)


class FakeError(grpc.RpcError):
    def __init__(self, code):
        self._code = code

    def code(self):
        return self._code

    def details(self):
        return "k=99 is outside 0..16"


for code, cls, retry in ((grpc.StatusCode.INVALID_ARGUMENT, specserve.InvalidArgumentError, False),
                         (grpc.StatusCode.RESOURCE_EXHAUSTED, specserve.ResourceExhaustedError, True),
                         (grpc.StatusCode.UNAVAILABLE, specserve.UnavailableError, True),
                         (grpc.StatusCode.DEADLINE_EXCEEDED, specserve.DeadlineExceededError, False),
                         (grpc.StatusCode.INTERNAL, specserve.SpecserveError, False)):
    e = errors.from_rpc_error(FakeError(code))
    assert type(e) is cls and e.code == code and e.retryable == retry, (code, type(e))
    assert str(e) == "%s: k=99 is outside 0..16" % code.name, str(e)
assert issubclass(specserve.DeadlineExceededError, TimeoutError)
print("installed:", pkg)
EOF
) || fail "the installed package"

# 2. Its command line: the console script and python -m specserve; a failed
#    call is exit status 2 with the gRPC status.
"$venv/bin/specserve-client" generate --help | grep -q -- --adaptive-k || fail "specserve-client --help"
(cd "$work" && "$venv/bin/python" -m specserve info --help >/dev/null) || fail "python -m specserve"
set +e
"$venv/bin/specserve-client" health --target "127.0.0.1:$(free_port)" --timeout 1 >/dev/null 2>"$work/closed.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q UNAVAILABLE "$work/closed.err" || fail "health on a closed port: rc $rc, $(cat "$work/closed.err")"

# 3. The checkout's script without the package builds it into a temporary
#    folder, keeps the older module API and leaves nothing behind.
listing() { ls -A "$DEPLOY_ROOT/clients/python" | grep -vx __pycache__; }
before=$(listing)
"$PYTHON" "$CLIENT_PY" generate --help | grep -q -- --adaptive-k || fail "specserve_client.py --help"
"$PYTHON" - "$CLIENT_PY" <<'EOF' || fail "specserve_client.py as a module"
import os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import specserve_client
gen, health = specserve_client.protos()
assert gen.GenerateRequest(k=3).k == 3 and health.HealthCheckResponse.SERVING == 1
assert callable(specserve_client.SpecserveClient) and callable(specserve_client.channel_credentials)
assert specserve_client.specserve.Client is not None
EOF
[ "$(listing)" = "$before" ] || fail "specserve_client.py wrote into clients/python"

deploy_log "python package install test passed"
