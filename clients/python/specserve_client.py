#!/usr/bin/env python3
"""A Python client for specserve's public API (specserve.v1.Generation).

Needs only Debian's python3-grpcio and python3-protobuf plus `protoc`
(protobuf-compiler): the message classes are generated from the repository's
.proto files on first use into a git-ignored folder, and the few gRPC stubs
are written here with grpc's generic channel methods, so neither grpc_tools
nor generated *_pb2_grpc.py files are needed.

    python3 clients/python/specserve_client.py generate --target localhost:50051 \
        --prompt 'def add(a, b):' --max-tokens 64 --stats
    python3 clients/python/specserve_client.py info --target localhost:50051
    python3 clients/python/specserve_client.py health --target localhost:50051 --wait 30

As a library:

    from specserve_client import SpecserveClient
    with SpecserveClient("localhost:50051") as c:
        for ev in c.generate("def add(a, b):", max_tokens=64):
            if ev.HasField("delta"):
                print(ev.delta.text, end="", flush=True)
"""

import argparse
import fcntl
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import grpc

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO_PROTO_DIR = os.path.normpath(os.path.join(_HERE, "..", "..", "proto"))
_GENERATION_PROTO = "specserve/v1/generation.proto"
_HEALTH_PROTO = "grpc/health/v1/health.proto"
# The health messages are generated under this Python package instead of
# `grpc.health.v1`, which the real `grpc` package would shadow. The proto
# package (and so the wire name grpc.health.v1.Health) is unchanged.
_HEALTH_PY_PKG = "specserve_grpc_health"

_DRAFTERS = {"unspecified": 0, "model": 1, "ngram": 2, "none": 3}


# --------------------------------------------------------------------------
# Generated message classes


def _proto_dir():
    return os.environ.get("SPECSERVE_PROTO_DIR", _REPO_PROTO_DIR)


def _default_gen_dir():
    if os.environ.get("SPECSERVE_PY_GEN"):
        return os.environ["SPECSERVE_PY_GEN"]
    local = os.path.join(_HERE, "_generated")
    if os.access(_HERE, os.W_OK):
        return local
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.path.join(cache, "specserve-client")


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _run_protoc(sources, digest, gen_dir, protoc):
    protoc = protoc or os.environ.get("PROTOC") or shutil.which("protoc")
    if not protoc:
        raise RuntimeError("protoc not found: install protobuf-compiler or set PROTOC")
    with tempfile.TemporaryDirectory() as stage:
        # Stage the protos so the health one lands under its own Python package.
        staged_gen = os.path.join(stage, _GENERATION_PROTO)
        staged_health = os.path.join(stage, _HEALTH_PY_PKG, "v1", "health.proto")
        for src, dst in ((sources[_GENERATION_PROTO], staged_gen), (sources[_HEALTH_PROTO], staged_health)):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
        out = os.path.join(stage, "out")
        os.makedirs(out)
        subprocess.run(
            [protoc, "-I", stage, "--python_out=" + out, os.path.relpath(staged_gen, stage),
             os.path.relpath(staged_health, stage)],
            check=True)
        for root, _, _ in os.walk(out):
            open(os.path.join(root, "__init__.py"), "a").close()
        shutil.rmtree(gen_dir, ignore_errors=True)
        shutil.copytree(out, gen_dir)
    # The stamp last: a reader that sees it sees every file.
    with open(os.path.join(gen_dir, ".stamp"), "w") as f:
        f.write(digest + "\n")


def generate_stubs(proto_dir=None, gen_dir=None, protoc=None):
    """Runs protoc --python_out for the public and health protos, once per
    proto content (a stamp holds their hash). Returns the folder to import from."""
    proto_dir = proto_dir or _proto_dir()
    gen_dir = gen_dir or _default_gen_dir()
    sources = {
        _GENERATION_PROTO: os.path.join(proto_dir, _GENERATION_PROTO),
        _HEALTH_PROTO: os.path.join(proto_dir, _HEALTH_PROTO),
    }
    digest = hashlib.sha256()
    for rel, path in sorted(sources.items()):
        with open(path, "rb") as f:
            digest.update(rel.encode() + b"\0" + f.read())
    stamp = os.path.join(gen_dir, ".stamp")
    if _read(stamp) == digest.hexdigest():
        return gen_dir
    # One generator at a time (tests start several clients at once); the
    # others wait, then find the stamp.
    os.makedirs(os.path.dirname(os.path.abspath(gen_dir)), exist_ok=True)
    with open(os.path.abspath(gen_dir) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _read(stamp) != digest.hexdigest():
            _run_protoc(sources, digest.hexdigest(), gen_dir, protoc)
    return gen_dir


_modules = None


def protos():
    """(generation_pb2, health_pb2), generating them first if needed."""
    global _modules
    if _modules is None:
        gen_dir = generate_stubs()
        if gen_dir not in sys.path:
            sys.path.insert(0, gen_dir)
        generation_pb2 = importlib.import_module("specserve.v1.generation_pb2")
        health_pb2 = importlib.import_module(_HEALTH_PY_PKG + ".v1.health_pb2")
        _modules = (generation_pb2, health_pb2)
    return _modules


# --------------------------------------------------------------------------
# The client


def channel_credentials(ca=None, cert=None, key=None):
    """TLS credentials from PEM files; None (plaintext) when no file is given."""
    if not (ca or cert or key):
        return None
    if bool(cert) != bool(key):
        raise ValueError("a client certificate and its key go together")

    def read(path):
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_channel_credentials(
        root_certificates=read(ca) if ca else None,
        private_key=read(key) if key else None,
        certificate_chain=read(cert) if cert else None)


class SpecserveClient:
    """specserve.v1.Generation and grpc.health.v1.Health over one channel.

    `target` is a gRPC target: HOST:PORT, or dns:///NAME:PORT for a headless
    Kubernetes Service (every ready pod's address; calls are spread over
    them by round_robin, see deploy/README.md)."""

    def __init__(self, target, credentials=None, server_name=None, round_robin=True):
        gen, health = protos()
        self._gen, self._health = gen, health
        options = [("grpc.max_receive_message_length", 64 << 20)]
        if round_robin:
            options.append(("grpc.service_config", json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})))
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=options)
        method = "/specserve.v1.Generation/"
        self._generate = self._channel.unary_stream(
            method + "Generate", request_serializer=gen.GenerateRequest.SerializeToString,
            response_deserializer=gen.GenerateResponse.FromString)
        self._generate_unary = self._channel.unary_unary(
            method + "GenerateUnary", request_serializer=gen.GenerateRequest.SerializeToString,
            response_deserializer=gen.GenerateUnaryResponse.FromString)
        self._model_info = self._channel.unary_unary(
            method + "GetModelInfo", request_serializer=gen.GetModelInfoRequest.SerializeToString,
            response_deserializer=gen.GetModelInfoResponse.FromString)
        self._health_check = self._channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=health.HealthCheckRequest.SerializeToString,
            response_deserializer=health.HealthCheckResponse.FromString)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def messages(self):
        """The generated specserve.v1 module (GenerateRequest, Drafter, ...)."""
        return self._gen

    def request(self, prompt, max_tokens=None, stop=(), temperature=0.0, top_k=0, top_p=0.0, seed=0,
                drafter="unspecified", k=None, adaptive_k=False):
        """A GenerateRequest. `prompt` is text or a list of token ids."""
        req = self._gen.GenerateRequest(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                                        drafter=_DRAFTERS[drafter])
        if isinstance(prompt, str):
            req.text = prompt
        else:
            req.token_ids.ids.extend(prompt)
        if max_tokens is not None:
            req.max_tokens = max_tokens
        req.stop.extend(stop)
        if adaptive_k:
            req.adaptive_k = True
        elif k is not None:
            req.k = k
        return req

    def generate(self, prompt, timeout=None, **kw):
        """Streams GenerateResponse events: Delta messages, then one Final."""
        return self._generate(self.request(prompt, **kw), timeout=timeout)

    def generate_unary(self, prompt, timeout=None, **kw):
        return self._generate_unary(self.request(prompt, **kw), timeout=timeout)

    def model_info(self, timeout=10):
        return self._model_info(self._gen.GetModelInfoRequest(), timeout=timeout)

    def health(self, service="", timeout=2):
        """The serving status name: SERVING, NOT_SERVING, ..."""
        resp = self._health_check(self._health.HealthCheckRequest(service=service), timeout=timeout)
        return self._health.HealthCheckResponse.ServingStatus.Name(resp.status)

    def wait_ready(self, seconds):
        """Waits until the server answers SERVING (the coordinator does once
        the target service has answered). Raises TimeoutError."""
        give_up = time.monotonic() + seconds
        last = "no answer"
        while True:
            try:
                status = self.health(timeout=max(0.1, min(2.0, give_up - time.monotonic())))
                if status == "SERVING":
                    return
                last = status
            except grpc.RpcError as e:
                last = "%s: %s" % (e.code().name, e.details())
            if time.monotonic() >= give_up:
                raise TimeoutError("not ready after %.0f s (%s)" % (seconds, last))
            time.sleep(0.2)


# --------------------------------------------------------------------------
# Command line


def _stats_dict(stats):
    fields = [f.name for f in stats.DESCRIPTOR.fields]
    return {name: getattr(stats, name) for name in fields}


def _cmd_generate(client, args):
    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    kw = dict(max_tokens=args.max_tokens, stop=args.stop or (), temperature=args.temperature, top_k=args.top_k,
              top_p=args.top_p, seed=args.seed, drafter=args.drafter, k=args.k, adaptive_k=args.adaptive_k)
    if args.unary:
        resp = client.generate_unary(prompt, timeout=args.timeout, **kw)
        text, ids, finish, stats = resp.text, list(resp.token_ids), resp.finish_reason, resp.stats
        if not args.json:
            sys.stdout.write(text)
    else:
        text, ids, finish, stats = "", [], "", None
        for ev in client.generate(prompt, timeout=args.timeout, **kw):
            kind = ev.WhichOneof("event")
            if kind == "delta":
                text += ev.delta.text
                ids.extend(ev.delta.token_ids)
                if not args.json:
                    sys.stdout.write(ev.delta.text)
                    sys.stdout.flush()
            elif kind == "final":
                finish, stats = ev.final.finish_reason, ev.final.stats
                tail = getattr(ev.final, "text", "")  # held-back text, where the proto has it
                if tail:
                    text += tail
                    if not args.json:
                        sys.stdout.write(tail)
        if stats is None:
            raise RuntimeError("the stream ended without a Final message")
    if args.json:
        json.dump({"text": text, "token_ids": ids, "finish_reason": finish, "stats": _stats_dict(stats)},
                  sys.stdout)
    sys.stdout.write("\n")
    if args.stats:
        s = stats
        print("finish=%s tokens=%d rounds=%d drafted=%d accepted=%d acceptance=%.3f ttft=%.3fs total=%.3fs "
              "tok/s=%.1f drafter=%s fallbacks=%d last_k=%d" %
              (finish, s.tokens, s.rounds, s.drafted, s.accepted, s.acceptance_rate, s.time_to_first_token_seconds,
               s.total_seconds, s.tokens_per_second, s.drafter, s.fallbacks, s.last_k), file=sys.stderr)
    return 0


def _cmd_info(client, args):
    info = client.model_info(timeout=args.timeout or 10)
    print(json.dumps({f.name: getattr(info, f.name) for f in info.DESCRIPTOR.fields}, indent=2))
    return 0


def _cmd_health(client, args):
    if args.wait:
        try:
            client.wait_ready(args.wait)
        except TimeoutError as e:
            print(str(e), file=sys.stderr)
            return 1
    status = client.health(service=args.service, timeout=args.timeout or 2)
    print(status)
    return 0 if status == "SERVING" else 1


def main(argv=None):
    p = argparse.ArgumentParser(description="specserve.v1.Generation client")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--target", default=os.environ.get("SPECSERVE_ADDR", "localhost:50051"),
                        help="coordinator address, HOST:PORT or dns:///NAME:PORT (default: $SPECSERVE_ADDR "
                             "or localhost:50051)")
    common.add_argument("--timeout", type=float, default=None, help="deadline of the call in seconds")
    common.add_argument("--wait-ready", type=float, default=0,
                        help="first wait up to this many seconds for the server to be SERVING")
    common.add_argument("--tls-ca", help="PEM CA certificate to verify the server (enables TLS)")
    common.add_argument("--tls-cert", help="PEM client certificate (mutual TLS)")
    common.add_argument("--tls-key", help="PEM key of --tls-cert")
    common.add_argument("--tls-server-name", help="expect this name in the server certificate")
    sub = p.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("generate", parents=[common], help="stream a generation and print its text")
    g.add_argument("--prompt", help="prompt text (default: read stdin)")
    g.add_argument("--max-tokens", type=int)
    g.add_argument("--stop", action="append", help="stop string (repeatable)")
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--top-p", type=float, default=0.0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--drafter", choices=sorted(_DRAFTERS), default="unspecified")
    kgroup = g.add_mutually_exclusive_group()
    kgroup.add_argument("--k", type=int, help="tokens drafted per round (0..16)")
    kgroup.add_argument("--adaptive-k", action="store_true", help="let the coordinator choose K every round")
    g.add_argument("--unary", action="store_true", help="use GenerateUnary instead of the stream")
    g.add_argument("--json", action="store_true", help="print one JSON object (text, token_ids, finish, stats)")
    g.add_argument("--stats", action="store_true", help="print the generation's statistics to stderr")
    sub.add_parser("info", parents=[common], help="print the served models (GetModelInfo)")
    h = sub.add_parser("health", parents=[common], help="grpc.health.v1 status; exit 0 when SERVING")
    h.add_argument("--service", default="")
    h.add_argument("--wait", type=float, default=0, help="wait up to this many seconds for SERVING")
    args = p.parse_args(argv)

    creds = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    with SpecserveClient(args.target, credentials=creds, server_name=args.tls_server_name) as client:
        try:
            if args.wait_ready:
                client.wait_ready(args.wait_ready)
            return {"generate": _cmd_generate, "info": _cmd_info, "health": _cmd_health}[args.cmd](client, args)
        except grpc.RpcError as e:
            print("specserve_client: %s: %s" % (e.code().name, e.details()), file=sys.stderr)
            return 2
        except TimeoutError as e:
            print("specserve_client: %s" % e, file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
