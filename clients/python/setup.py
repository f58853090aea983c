"""Generates the gRPC modules while the package is built (build_py), from
the repository's proto/ (or the copy an sdist carries); see build_protos.py.
Everything else is in pyproject.toml."""

import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_protos  # noqa: E402

GENERATED_PACKAGES = ["specserve.v1", "specserve._grpc_health", "specserve._grpc_health.v1"]


class BuildPyWithProtos(build_py):
    def run(self):
        super().run()
        # An editable install imports from src/: generate there (git-ignored).
        out = os.path.join(HERE, "src") if getattr(self, "editable_mode", False) else self.build_lib
        self.announce("generating gRPC modules into %s" % out, level=2)
        self._generated = [os.path.join(out, p) for p in build_protos.generate(out)]

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + list(getattr(self, "_generated", []))


class SdistWithProtos(sdist):
    """Carries the two .proto files, so the sdist builds outside the repository."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        src = build_protos.find_proto_dir()
        for rel in (build_protos.GENERATION_PROTO, build_protos.HEALTH_PROTO):
            dst = os.path.join(base_dir, "proto", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(src, rel), dst)


setup(cmdclass={"build_py": BuildPyWithProtos, "sdist": SdistWithProtos})
