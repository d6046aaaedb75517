"""nvcc compiles the CUDA kernel for sm_80 and sm_90 without a warning (no GPU needed).

Spills and local memory are warnings here too, and warnings are errors. The PTX is checked
for the instructions the design promises: 16-byte global loads and stores on the vector path.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.cuda_host import emulation

pytestmark = pytest.mark.cuda_host

SOURCE = Path(emulation.launcher().__file__).with_name("rope.cu")
STRICT = ["-Werror", "all-warnings", "-Xptxas", "-warn-spills,-warn-lmem-usage"]


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


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compiles_without_warnings(nvcc, tmp_path, arch):
    output = compile_cuda(
        nvcc, f"-arch={arch}", "-c", str(SOURCE), "-o", str(tmp_path / "rope.o"), *STRICT,
        "-Xptxas", "-v",
    )  # fmt: skip
    registers = [int(n) for n in re.findall(r"Used (\d+) registers", output)]
    assert len(registers) == 16
    # 80 registers (allocated in steps of 8) let 3 blocks of 256 threads share an SM
    assert max(registers) <= 80, registers


@pytest.fixture(scope="module")
def ptx(nvcc, tmp_path_factory):
    """PTX of the exact source NVRTC gets (rope.cuh pasted in), one entry per variant."""
    folder = tmp_path_factory.mktemp("ptx")
    source = folder / "rope_nvrtc.cu"
    text = emulation.launcher().kernel_source()
    assert "#include" not in text  # NVRTC has no headers to include
    source.write_text(text)
    compile_cuda(nvcc, "-arch=sm_90", "--ptx", str(source), "-o", str(folder / "rope.ptx"))
    body = (folder / "rope.ptx").read_text()
    return dict(re.findall(r"\.visible \.entry (\S+)\((.*?)\n\}\n", body, flags=re.S))


def global_accesses(body):
    return re.findall(r"^\s*((?:ld|st)(?:\.global)?(?:\.\w+)*)\s", body, flags=re.M)


def entry(ptx, element, interleaved, vector):
    """The entry of rope_kernel<element, interleaved, vector> (Itanium mangling)."""
    mangled = {"rope_f16": "8rope_f16", "rope_bf16": "9rope_bf16", "float": "f", "double": "d"}
    name = f"_Z11rope_kernelI{mangled[element]}Lb{int(interleaved)}ELb{int(vector)}EEv10RopeParams"
    return ptx[name]


def test_every_variant_is_compiled(ptx):
    assert len(ptx) == len(emulation.launcher().KERNEL_NAMES) == 16


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("element", ["rope_f16", "rope_bf16", "float", "double"])
def test_vector_path_moves_16_bytes_per_instruction(ptx, element, interleaved):
    vector = list(global_accesses(entry(ptx, element, interleaved, True)))
    rotary_loads = [op for op in vector if op.startswith("ld.global.v4")]
    rotary_stores = [op for op in vector if op.startswith("st.v4") or op.startswith("st.global.v4")]
    # per tensor branch: 2 vectors per head for 4 heads, plus the cos and sin vectors
    assert len(rotary_stores) == 2 * 2 * 4
    assert len(rotary_loads) >= 2 * 2 * 4 + 2 * 2
    scalar = global_accesses(entry(ptx, element, interleaved, False))
    assert not [op for op in scalar if ".v2" in op or ".v4" in op]


def test_no_local_memory(ptx):
    for name, body in ptx.items():
        assert ".local" not in body, name
