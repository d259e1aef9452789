"""Fixtures of the sweep, analysis and plot tests."""
import sys

import pytest

from plotfiles import load_plot_module


@pytest.fixture(scope="module")
def plot_module():
    mod = load_plot_module()
    yield mod
    del sys.modules[mod.__name__]
