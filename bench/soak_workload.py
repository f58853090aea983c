"""What the soak's clients send and what they count (bench/soak.py): the
built-in prompts, the request styles, and the shared outcome tallies."""
import threading

SOLO_MAX_TOKENS = 96

# Short code prompts, added to bench/prompts.jsonl's to reach --prompts.
EXTRA_PROMPTS = [
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "def add(a, b):\n",
    "def is_prime(n):\n    if n < 2:\n        return False\n",
    "class Point:\n    def __init__(self, x, y):\n",
    "import json\n\n\ndef load_config(path):\n",
    "def reverse_words(s):\n    return ",
    "def merge_sorted(a, b):\n    result = []\n    i = j = 0\n",
    "# Count the words in a file.\nfrom collections import Counter\n\n\ndef word_counts(path):\n",
    "def factorial(n):\n    if n == 0:\n        return 1\n",
    "class Queue:\n    def __init__(self):\n        self.items = []\n\n    def enqueue(self, item):\n",
    "def flatten(nested):\n    out = []\n    for item in nested:\n",
    "import os\n\n\ndef list_python_files(root):\n    for dirpath, dirnames, filenames in os.walk(root):\n",
    "def main():\n    args = parse_args()\n",
    "def celsius_to_fahrenheit(c):\n",
    "for line in open(\"data.txt\"):\n    fields = line.split(\",\")\n",
    "def unique(values):\n    seen = set()\n",
]

# What a request asks besides the prompt and max_tokens: (label, kwargs).
STYLES = [
    ("default", {}),
    ("model", {"drafter": "model"}),
    ("model-k", None),  # drafter model with a random fixed K, filled in per request
    ("ngram", {"drafter": "ngram"}),
    ("adaptive", {"adaptive_k": True}),
    ("model-adaptive", {"drafter": "model", "adaptive_k": True}),
    ("none", {"drafter": "none"}),
]


class Stats:
    """Outcomes of the load phase, shared by the client threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ok = 0
        self.cancelled = 0
        self.completed_tokens = 0
        self.streamed_tokens = 0  # every token received, cancelled requests included
        self.latencies = []
        self.ttfts = []
        self.errors = []  # (t0, t1, code name, details, style)
        self.mismatches = []
        self.completed = []  # (t0, t1, style, drafter used, fallbacks)
        self.by_style = {}
        self.client_exceptions = []
