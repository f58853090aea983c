#!/usr/bin/env python3
"""Renders chat templates with jinja2 exactly as HF transformers'
apply_chat_template does, as the reference for tests/chat_template_test.cc.

    render_reference.py REQUESTS.json RESULTS.json

REQUESTS.json is a list of {"template": FILE or "source": TEXT, "bos_token",
"eos_token", "messages", "add_generation_prompt", "tools" (optional),
"extra" (optional: more template variables)}. RESULTS.json gets one
{"ok": true, "text": ...} or {"ok": false, "kind": "raised" | "error",
"error": message} per request, in order.

The environment is transformers' (utils/chat_template_utils.py,
_compile_jinja_template): ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, the loopcontrols extension, tojson as json.dumps with
ensure_ascii=False, and the globals raise_exception and strftime_now. It
renders with messages, tools (None when absent), documents (None),
add_generation_prompt, the special tokens and the extra variables.

Exit status 3: jinja2 is not installed (Debian: python3-jinja2).
"""
import json
import sys
from datetime import datetime

try:
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("render_reference.py: jinja2 is missing (apt-get install python3-jinja2)", file=sys.stderr)
    sys.exit(3)


class Raised(jinja2.exceptions.TemplateError):
    """What raise_exception raises (transformers raises TemplateError)."""


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, req, cache):
    if "template" in req:
        path = req["template"]
        if path not in cache:
            with open(path, encoding="utf-8") as f:
                cache[path] = f.read()
        source = cache[path]
    else:
        source = req["source"]
    variables = dict(
        messages=req["messages"],
        tools=req.get("tools"),
        documents=None,
        add_generation_prompt=req["add_generation_prompt"],
        bos_token=req.get("bos_token", ""),
        eos_token=req.get("eos_token", ""),
    )
    variables.update(req.get("extra", {}))
    try:
        return {"ok": True, "text": env.from_string(source).render(**variables)}
    except Raised as e:
        return {"ok": False, "kind": "raised", "error": str(e)}
    except Exception as e:  # noqa: BLE001 - any template error is a result to compare
        return {"ok": False, "kind": "error", "error": f"{type(e).__name__}: {e}"}


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        requests = json.load(f)
    env, cache = environment(), {}
    results = [render(env, r, cache) for r in requests]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
