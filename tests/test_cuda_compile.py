"""nvcc compiles the CUDA kernels for sm_80 and sm_90 without a warning (no GPU needed).

Spills are warnings here too, and warnings are errors. Local memory is checked per kernel:
none at all in the table kernel; in the gather kernel, only the 40-byte frame of CUDA's
own float64 sin/cos for arguments past its fast range reduction (Payne-Hanek), which a
position outside the table cache can reach. The PTX is checked for the instructions the
design promises: 16-byte global loads and stores on the vector path.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.cuda_host import emulation

pytestmark = pytest.mark.cuda_host

SOURCE = Path(emulation.launcher().__file__).with_name("rope.cu")
STRICT = ["-Werror", "all-warnings", "-Xptxas", "-warn-spills", "-DROPE_INSTANTIATE_ALL"]
#: The stack frame of CUDA's float64 trigonometric slow path (bytes).
TRIG_FRAME = 40


@pytest.fixture(scope="module")
def nvcc():
    compiler = emulation.nvcc()
    if compiler is None:
        pytest.skip("nvcc is not on PATH")
    return compiler


def compile_cuda(nvcc, *args):
    done = subprocess.run([nvcc, *args], capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "warning" not in output.lower(), output
    return output


def resources(ptxas_output):
    """{entry: (registers, stack frame bytes, spill store bytes)} from ``ptxas -v``."""
    found = {}
    pattern = (
        r"Compiling entry function '(\w+)'.*?(\d+) bytes stack frame, (\d+) bytes spill stores"
        r".*?Used (\d+) registers"
    )
    for name, frame, spills, registers in re.findall(pattern, ptxas_output, flags=re.S):
        found[name] = (int(registers), int(frame), int(spills))
    return found


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compiles_without_warnings(nvcc, tmp_path, arch):
    output = compile_cuda(
        nvcc, f"-arch={arch}", "-c", str(SOURCE), "-o", str(tmp_path / "rope.o"), *STRICT,
        "-Xptxas", "-v",
    )  # fmt: skip
    found = resources(output)
    assert len(found) == 32
    for name, (registers, frame, spills) in found.items():
        # 80 registers (allocated in steps of 8) let 3 blocks of 256 threads share an SM
        assert registers <= 80, (name, registers)
        assert spills == 0, name
        assert frame == (TRIG_FRAME if "gather" in name else 0), (name, frame)
    table = [r for name, (r, _, _) in found.items() if "gather" not in name]
    assert len(table) == 16


@pytest.fixture(scope="module")
def ptx(nvcc, tmp_path_factory):
    """PTX of the exact source NVRTC gets (rope.cuh pasted in), one entry per variant."""
    folder = tmp_path_factory.mktemp("ptx")
    source = folder / "rope_nvrtc.cu"
    text = emulation.launcher().kernel_source()
    assert "#include" not in text  # NVRTC has no headers to include
    source.write_text(text)
    compile_cuda(
        nvcc, "-arch=sm_90", "-DROPE_INSTANTIATE_ALL", "--ptx", str(source), "-o",
        str(folder / "rope.ptx"),
    )  # fmt: skip
    body = (folder / "rope.ptx").read_text()
    entries = dict(re.findall(r"\.visible \.entry (\S+)\((.*?)\n\}\n", body, flags=re.S))
    functions = dict(re.findall(r"^\.func .*?(\w+)\((.*?)\n\}\n", body, flags=re.S | re.M))
    return entries, functions


def global_accesses(body):
    return re.findall(r"^\s*((?:ld|st)(?:\.global)?(?:\.\w+)*)\s", body, flags=re.M)


def entry(ptx, kernel, element, interleaved, vector):
    """The entry of kernel<element, interleaved, vector> (Itanium mangling)."""
    mangled = {"rope_f16": "8rope_f16", "rope_bf16": "9rope_bf16", "float": "f", "double": "d"}
    flags = f"Lb{int(interleaved)}ELb{int(vector)}E"
    return ptx[0][f"_Z{len(kernel)}{kernel}I{mangled[element]}{flags}Ev10RopeParams"]


def test_every_variant_is_compiled(ptx):
    names = emulation.launcher().KERNEL_NAMES
    assert len(ptx[0]) == sum(len(variants) for variants in names.values()) == 32


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("element", ["rope_f16", "rope_bf16", "float", "double"])
@pytest.mark.parametrize(("kernel", "paths"), [("rope_kernel", 1), ("rope_gather_kernel", 2)])
def test_vector_path_moves_16_bytes_per_instruction(ptx, kernel, paths, element, interleaved):
    """Per tensor branch and table source (read, or computed by the gather kernel): 2 vectors
    per head for 4 heads, plus the cos and sin vectors where tables are read."""
    vector = list(global_accesses(entry(ptx, kernel, element, interleaved, True)))
    rotary_loads = [op for op in vector if op.startswith("ld.global.v4")]
    rotary_stores = [op for op in vector if op.startswith("st.v4") or op.startswith("st.global.v4")]
    assert len(rotary_stores) == 2 * 2 * 4 * paths
    assert len(rotary_loads) >= 2 * 2 * 4 * paths + 2 * 2
    scalar = global_accesses(entry(ptx, kernel, element, interleaved, False))
    # ld.global.nc: the read-only coefficient table of CUDA's float64 sin/cos
    assert not [op for op in scalar if (".v2" in op or ".v4" in op) and ".nc" not in op]


def test_local_memory_only_in_the_trigonometric_slow_path(ptx):
    entries, functions = ptx
    for name, body in entries.items():
        assert ".local" not in body, name
        assert ("call" in body) == ("gather" in name), name  # the slow path, not inlined
    assert [name for name, body in functions.items() if ".local" in body] == [
        "__internal_trig_reduction_slowpathd"
    ]
