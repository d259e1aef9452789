"""Fixtures of the sweep, analysis and plot tests."""
import json
import subprocess
import sys

import pytest

from plotfiles import load_plot_module


@pytest.fixture(scope="module")
def plot_module():
    mod = load_plot_module()
    yield mod
    del sys.modules[mod.__name__]


@pytest.fixture(scope="module")
def json_tool(build_dir):
    """json_tool(name): a tool built beside xsagpt (tests/tools/) that reads one JSON query
    on stdin and answers JSON, as a function of the query."""
    def tool(name):
        path = build_dir / name
        if not path.exists():
            pytest.fail(f"{path} not built: cmake --build {build_dir} --target {name}")

        def run(query):
            out = subprocess.run([str(path)], input=json.dumps(query), capture_output=True, text=True, check=True)
            return json.loads(out.stdout)
        return run
    return tool
