"""What can be proven about the CUDA kernels without a GPU: the build carries Hopper
(sm_90) machine code for every kernel, not only PTX for the driver to compile at
start, and no kernel spills registers or keeps a stack frame (both live in local
memory, which is device memory behind the L1: a spill in a memory-bound kernel's
inner loop costs what the kernel exists to save). Read with `cuobjdump` from the
objects the build produced, the same bytes a GPU would run. cuobjdump comes with
the CUDA toolkit, or with Triton's wheel, which torch installs into .venv."""
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

KERNEL_SOURCES = ("add_norm_cuda", "lm_head_loss_cuda", "rope_qkv_cuda", "xsa_cuda", "fp8_cast_cuda",
                  "gelu_amax_cuda")
# Entry points each object must hold (a substring of the mangled name), so the
# check below cannot pass on an object that lost its kernels.
ENTRY_POINTS = {"add_norm_cuda": ("forward_kernel", "forward_regs", "backward"),
                "lm_head_loss_cuda": ("cross_entropy",), "rope_qkv_cuda": ("rope",),
                "xsa_cuda": ("xsa_forward", "xsa_backward"), "fp8_cast_cuda": ("cast_kernel", "cast_transpose"),
                "gelu_amax_cuda": ("GeluOp", "GeluBackwardOp")}
USAGE = re.compile(r"Function (\S+):\s*\n?\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


def find_tool(name: str) -> str | None:
    triton = pathlib.Path(sys.prefix) / f"lib/python{sys.version_info.major}.{sys.version_info.minor}" \
        / "site-packages/triton/backends/nvidia/bin" / name
    for c in (shutil.which(name), f"/usr/local/cuda/bin/{name}", str(triton)):
        if c and pathlib.Path(c).exists():
            return c
    return None


@pytest.fixture(scope="module")
def cuobjdump():
    tool = find_tool("cuobjdump")
    if not tool:
        pytest.skip("no cuobjdump (CUDA toolkit or Triton's wheel)")
    return tool


@pytest.fixture(scope="module")
def objects(build_dir):
    folder = build_dir / "CMakeFiles/xsagpt_lib.dir/src/kernels"
    objs = {s: folder / f"{s}.cu.o" for s in KERNEL_SOURCES}
    if not all(o.exists() for o in objs.values()):
        pytest.skip("this build has no CUDA kernels (no nvcc at configure time, or XSAGPT_KERNELS=OFF)")
    return objs


def resource_usage(cuobjdump: str, path: pathlib.Path) -> list[tuple[str, int, int]]:
    """(function, stack bytes, local bytes) for every function in the file's cubins."""
    text = subprocess.run([cuobjdump, "-res-usage", str(path)], check=True, capture_output=True, text=True).stdout
    return [(m[1], int(m[3]), int(m[5])) for m in USAGE.finditer(text)]


def test_every_kernel_object_carries_sm90_machine_code(cuobjdump, objects, build_dir):
    for name, obj in objects.items():
        elfs = subprocess.run([cuobjdump, "--list-elf", str(obj)], check=True, capture_output=True, text=True).stdout
        assert "sm_90" in elfs, f"{obj.name}: no sm_90 cubin:\n{elfs}"
    linked = subprocess.run([cuobjdump, "--list-elf", str(build_dir / "xsagpt")], check=True, capture_output=True,
                            text=True).stdout
    assert linked.count("sm_90.cubin") >= len(objects), linked


def test_no_kernel_spills_or_keeps_a_stack_frame(cuobjdump, objects):
    for name, obj in objects.items():
        usage = resource_usage(cuobjdump, obj)
        names = " ".join(f for f, _, _ in usage)
        for entry in ENTRY_POINTS[name]:
            assert entry in names, f"{obj.name}: no function named like {entry!r} among {len(usage)}"
        bad = [(f, stack, local) for f, stack, local in usage if stack or local]
        assert not bad, f"{obj.name}: stack frame or local memory (spills) in " + \
            "; ".join(f"{f}: stack {s} B, local {l} B" for f, s, l in bad)


def test_the_check_sees_local_memory(cuobjdump, tmp_path):
    """The parser above on a kernel that must use local memory (an array written and
    read at indices known only at run time cannot live in registers): it has to
    report it, or the test above proves nothing."""
    nvcc = find_tool("nvcc")
    if not nvcc:
        pytest.skip("no nvcc")
    src = tmp_path / "spill.cu"
    src.write_text("__global__ void spill(const int* idx, float* out) {\n"
                   "  float a[64];\n"
                   "  for (int i = 0; i < 64; ++i) a[i] = out[i];\n"
                   "  for (int i = 0; i < 64; ++i) a[idx[i]] += a[i];\n"
                   "  out[threadIdx.x] = a[idx[threadIdx.x]];\n"
                   "}\n")
    obj = tmp_path / "spill.o"
    subprocess.run([nvcc, "-gencode", "arch=compute_90,code=sm_90", "-O3", "-c", str(src), "-o", str(obj)],
                   check=True, capture_output=True)
    usage = resource_usage(cuobjdump, obj)
    assert len(usage) == 1 and "spill" in usage[0][0]
    assert usage[0][1] > 0 or usage[0][2] > 0, usage
