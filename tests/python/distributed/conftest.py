"""The distributed tests' own shards: a larger corpus than the top-level conftest's
`shards`, which this fixture replaces for the tests in this folder."""
import pytest

from shardio import write_markov_shards


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_markov_shards(tmp_path_factory.mktemp("dist_shards"), {
        "val_000000.bin": 4096, "train_000001.bin": 30000, "train_000002.bin": 20000}, seed=1)
