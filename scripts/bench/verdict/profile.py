"""The profile stage: where the training step spends its device time, by kernel and
category (`xsagpt bench --profile`): `fused` beside `fused` with each kernel outside
it that runs the shipped models (fp8), SA and XSA at both sizes, so FP8's GEMMs stand
against the kernels that feed them."""
import time

from .ledger import BIN, Ledger
from .sizes import profile_shapes
from .timing import variants


def profile(v: Ledger, timeout):
    t_end = time.monotonic() + timeout
    for size, (cfg, b, t) in profile_shapes(v).items():
        v.sh("profile", [BIN, "bench", "--no-block", "--no-step", "--profile", "--variants", variants(v)["profile"],
                         "--step-config", cfg, "--step-batch", b, "--step-seq-len", t,
                         "--json", v.res / f"profile-{size}.json"], t_end - time.monotonic())
