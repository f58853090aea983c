#!/usr/bin/env python3
"""Validates generated documents against their JSON Schemas with Debian's
python3-jsonschema (the reference for constrain_test).

Usage: constrain_validate.py REQUESTS.json RESULTS.json
REQUESTS is a list of {"schema": ..., "doc": "<text>"}; RESULTS gets one
string per request: "" when the text parses as JSON and validates (formats
checked), else the reason. Exit status 3 when jsonschema is missing.
"""
import datetime
import json
import sys

try:
    import jsonschema
except ImportError as e:
    print(f"python3-jsonschema is missing: {e}", file=sys.stderr)
    sys.exit(3)


def format_checker(cls):
    """The draft's own format checker; where "time" / "date-time" need the
    absent rfc3339-validator, RFC 3339 checks through datetime instead."""
    base = getattr(cls, "FORMAT_CHECKER", None) or jsonschema.FormatChecker()
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(base.checkers)

    def rfc3339(text, with_date):
        if not isinstance(text, str):
            return True
        t = text.replace("Z", "+00:00").replace("z", "+00:00")
        if with_date:
            if len(t) < 11 or t[10] not in "Tt":
                return False
            value = datetime.datetime.fromisoformat(t)
        else:
            value = datetime.time.fromisoformat(t)
        return value.tzinfo is not None

    if "time" not in checker.checkers:
        checker.checks("time", raises=ValueError)(lambda x: rfc3339(x, False))
    if "date-time" not in checker.checkers:
        checker.checks("date-time", raises=ValueError)(lambda x: rfc3339(x, True))
    return checker


def check(schema, doc):
    try:
        value = json.loads(doc)
    except ValueError as e:
        return f"not JSON: {e}"
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    v = cls(schema, format_checker=format_checker(cls))
    errors = sorted(v.iter_errors(value), key=lambda e: list(e.path))
    if errors:
        return "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:3])
    return ""


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        requests = json.load(f)
    results = [check(r["schema"], r["doc"]) for r in requests]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
