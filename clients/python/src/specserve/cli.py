"""The command line: `specserve-client` (installed), `python3 -m specserve`,
or clients/python/specserve_client.py from a checkout.

    specserve-client generate --target localhost:50051 --prompt 'def add(a, b):' --max-tokens 64 --stats
    specserve-client info --target localhost:50051
    specserve-client health --target localhost:50051 --wait 30

Exit status 2 and the gRPC status on stderr when a call fails."""

import argparse
import dataclasses
import json
import os
import sys
from typing import List, Optional

from specserve._common import DRAFTERS, tls_credentials
from specserve.client import Client
from specserve.errors import SpecserveError
from specserve.types import GenerationResult


def _cmd_generate(client: Client, args: argparse.Namespace) -> int:
    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    kw = dict(max_tokens=args.max_tokens, stop=args.stop or (), temperature=args.temperature, top_k=args.top_k,
              top_p=args.top_p, seed=args.seed, drafter=args.drafter, k=args.k, adaptive_k=args.adaptive_k,
              timeout=args.timeout)
    if args.logprobs is not None:
        kw.update(logprobs=True, top_logprobs=args.logprobs)
    result: GenerationResult
    if args.unary:
        result = client.generate(prompt, **kw)  # type: ignore[arg-type]
        if not args.json:
            sys.stdout.write(result.text)
    else:
        stream = client.stream(prompt, **kw)  # type: ignore[arg-type]
        for delta in stream:
            if not args.json:
                sys.stdout.write(delta.text)
                sys.stdout.flush()
        result = stream.get_result()
    if args.json:
        json.dump({"text": result.text, "token_ids": result.token_ids, "finish_reason": result.finish_reason,
                   "stats": dataclasses.asdict(result.stats), "request_id": result.request_id,
                   "logprobs": [dataclasses.asdict(t) for t in result.logprobs]}, sys.stdout)
    sys.stdout.write("\n")
    if args.stats:
        s = result.stats
        print("finish=%s tokens=%d rounds=%d drafted=%d accepted=%d acceptance=%.3f ttft=%.3fs total=%.3fs "
              "tok/s=%.1f drafter=%s fallbacks=%d last_k=%d" %
              (result.finish_reason, s.tokens, s.rounds, s.drafted, s.accepted, s.acceptance_rate,
               s.time_to_first_token_seconds, s.total_seconds, s.tokens_per_second, s.drafter, s.fallbacks,
               s.last_k), file=sys.stderr)
    return 0


def _cmd_info(client: Client, args: argparse.Namespace) -> int:
    info = client.model_info(timeout=args.timeout or 10)
    print(json.dumps(dataclasses.asdict(info), indent=2))
    return 0


def _cmd_health(client: Client, args: argparse.Namespace) -> int:
    if args.wait:
        try:
            client.wait_ready(args.wait)
        except TimeoutError as e:
            print(str(e), file=sys.stderr)
            return 1
    status = client.health(args.service, timeout=args.timeout or 2)
    print(status)
    return 0 if status == "SERVING" else 1


def parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="specserve.v1.Generation client")
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
    g.add_argument("--drafter", choices=sorted(DRAFTERS), default="unspecified")
    kgroup = g.add_mutually_exclusive_group()
    kgroup.add_argument("--k", type=int, help="tokens drafted per round (0..16)")
    kgroup.add_argument("--adaptive-k", action="store_true", help="let the coordinator choose K every round")
    g.add_argument("--unary", action="store_true", help="use GenerateUnary instead of the stream")
    g.add_argument("--logprobs", type=int, metavar="N",
                   help="return each token's logprob and N (0..20) alternatives (in --json's \"logprobs\")")
    g.add_argument("--json", action="store_true",
                   help="print one JSON object (text, token_ids, finish_reason, stats, request_id)")
    g.add_argument("--stats", action="store_true", help="print the generation's statistics to stderr")
    sub.add_parser("info", parents=[common], help="print the served models (GetModelInfo)")
    h = sub.add_parser("health", parents=[common], help="grpc.health.v1 status; exit 0 when SERVING")
    h.add_argument("--service", default="")
    h.add_argument("--wait", type=float, default=0, help="wait up to this many seconds for SERVING")
    return p


def main(argv: Optional[List[str]] = None, prog: Optional[str] = None) -> int:
    p = parser(prog)
    args = p.parse_args(argv)
    try:
        creds = tls_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except (OSError, ValueError) as e:
        p.error(str(e))
    with Client(args.target, credentials=creds, server_name=args.tls_server_name) as client:
        try:
            if args.wait_ready:
                client.wait_ready(args.wait_ready)
            return {"generate": _cmd_generate, "info": _cmd_info, "health": _cmd_health}[args.cmd](client, args)
        except SpecserveError as e:
            print("%s: %s" % (p.prog, e), file=sys.stderr)
            return 2
