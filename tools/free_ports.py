"""N distinct free TCP ports below the ephemeral range (32768+) that outgoing
connections draw from: a port from bind(0) may become some connection's
source port before a server listens on it. Used by tests/deploy/lib.sh and
bench/soak.py.

    python3 tools/free_ports.py N     # prints N ports, space-separated
"""
import random
import socket
import sys


def free_ports(n):
    found = []
    for port in random.sample(range(20000, 32000), 12000):
        s = socket.socket()
        try:
            s.bind(("0.0.0.0", port))
            found.append(port)
        except OSError:
            pass
        finally:
            s.close()
        if len(found) == n:
            return found
    raise RuntimeError("no free ports")


if __name__ == "__main__":
    print(" ".join(map(str, free_ports(int(sys.argv[1])))))
