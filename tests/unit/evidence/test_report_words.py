"""The committed H200 evidence run, rendered again: the words a cold reader asked about are explained,
the re-run part says what to install, and the whole report fits with nothing left out."""

from __future__ import annotations

import os
import re
from typing import Any

from evidence_run import by_id, section
from helpers import ROOT

from repro.evidence.report import report
from repro.run import scripts


def test_the_legend_explains_worst_of_k_samples_and_us_per_call(roomy: str, docs: list[dict[str, Any]]) -> None:
    legend = next(ln for ln in roomy.splitlines() if ln.startswith("_The CI covers"))
    assert '"99.2% CI, worst of 6": 6 comparisons decide together, each CI at 1 - 0.05/6 (Bonferroni)' in legend
    assert "n: rounds (each a median of samples) or samples." in legend
    assert "same GPU ±y% (k runs on j GPUs): the farthest run from its GPU's median" in legend
    assert "us/call: a kernel's time over its launches in one call" in legend
    # Without a worst-of-k headline the legend does not explain one.
    solo = report([by_id(docs, "5090-linear")])
    assert "worst of" not in solo and "us/call: " in solo


def test_a_kernel_basis_ratio_says_which_kernels_count(rendered: str, docs: list[dict[str, Any]]) -> None:
    adam = section(report([by_id(docs, "fused-adam-capturable")]), "fused-adam-capturable")  # with its details
    note = "_Ratios on basis kernel: profiler time per step of kernels whose names contain adam, multi_tensor, "
    left = "`elementwise_kernel<gpu_kernel_impl_nocast<BinaryFunctor<DivFunctor>>>` (25.8 ms/step in torch "
    assert note + "foreach (kernel_match), leaving out " + left in adam
    assert 'the medians above and "whole steps" (their ratio, not paired) time whole steps._' in adam
    assert "basis kernel" not in section(rendered, "5090-linear")  # CUDA-event ratios need no note
    doc = by_id(docs, "fused-adam-capturable")
    del doc["extra"]["kernel_match"]
    assert "profiler time per step of the profiled kernels;" in report([doc])


def _heredoc(script: str, delimiter: str, holding: str = "") -> str:
    """The first heredoc ``delimiter`` of ``script`` whose body holds ``holding``."""
    for match in re.finditer(rf"<<'{delimiter}'\n(.*?)\n{delimiter}\n", script, re.S):
        if holding in match.group(1):
            return match.group(1)
    raise AssertionError(f"no heredoc {delimiter} holding {holding!r}")


def test_one_install_block_says_what_to_install_besides_the_wheel(rendered: str, docs: list[dict[str, Any]]) -> None:
    head = rendered.split("\n## `5090-linear`", 1)[0]
    said = (
        "install torch 2.11.0+cu130 (CUDA 13.0); cuda-bindings (graph-memset's torch-graph memset variants; without "
        "it they are skipped); nvcc on "
    )
    assert said + "PATH (graph-memset's pure CUDA twin; this run's: cuda_13.0.r13.0/compiler.36424714_0)" in head
    wheel = "./20261201T111151Z-438281/harness/gpu_repro-0.1.0+src.28ba2d578778-py3-none-any.whl"
    block = "pip install torch==2.11.0+cu130 --index-url https://download.pytorch.org/whl/cu130\n"
    assert f"```bash\n{block}pip install 'cuda-bindings==13.*'\npip install '{wheel}[plots]'\n```" in head
    # Once for the report, not once per repro; the wheel with its plots extra (matplotlib).
    assert rendered.count("pip install") == 3
    assert "```bash\nrepro run solve-512-cliff\n```" in section(rendered, "solve-512-cliff")  # its defaults
    # Without graph-memset there is nothing but torch and the wheel to install.
    alone = report([by_id(docs, "5090-linear")]).split("\n## `", 1)[0]
    assert "cuda-bindings" not in alone and "nvcc" not in alone and f"pip install '{wheel}[plots]'" in alone


def test_the_gpu_tool_extracts_the_wheel_and_the_5090_linear_line(rendered: str, tmp_path: Any) -> None:
    import subprocess
    import sys

    code = _heredoc((ROOT / "tools" / "gpu-final.sh").read_text(), "PY", holding="**Re-run**")
    (tmp_path / "report.md").write_text(rendered)
    env = {**os.environ, "RERUN_IDS": "5090-linear graph-memset"}
    argv = [sys.executable, "-c", code, str(tmp_path / "report.md")]
    out = subprocess.run(argv, capture_output=True, text=True, env=env)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, out.stderr
    # Every install line of the report, then each picked section's `repro run` line.
    assert lines[0] == "set -e" and lines[1].startswith("pip install torch==2.11.0+cu130 --index-url")
    assert lines[2] == "pip install 'cuda-bindings==13.*'"
    assert lines[3].startswith("pip install './20261201T111151Z-438281/harness/gpu_repro-")
    assert lines[4] == "repro run 5090-linear"
    assert lines[5] == "repro run graph-memset" and len(lines) == 6


def test_the_whole_evidence_report_fits_and_names_what_it_leaves_out(rendered: str, docs: list[dict[str, Any]]) -> None:
    from repro.evidence.report import PASTE_LIMIT, PASTE_LINES

    assert len(rendered) <= PASTE_LIMIT and rendered.count("\n") + 1 <= PASTE_LINES
    assert "Report cut" not in rendered and all(f"## `{d['repro']['id']}`" in rendered for d in docs)
    # The details blocks go first, then the lines that restate a finding (this run renders that lean under
    # today's harness): the note names each kind of line it left out that the sections have, and only those.
    left_out = next(ln for ln in rendered.splitlines() if ln.startswith("_Left out here"))
    assert "every repro's details" in left_out
    assert "the Holds-for, Does-not-hold-for, Impact, Re-run-elsewhere, and Method lines" in left_out
    assert "Holds for:" not in rendered and "Why-the" not in left_out  # no section has a Why-the-methods line
    # The machine's block stays, or the note names the environment as left to the bundle.
    machine = "<details><summary>machine A: fingerprint, GPU state, libraries</summary>" in rendered
    assert machine != ("the environment" in left_out)
    # Said once: the seed's program against the headline and the scope lines, not again in the details.
    memset = section(rendered, "graph-memset")
    assert "it differs from the twin's headline because" not in memset and "Also over 1.5" not in rendered
    assert rendered.count("ModuleNotFoundError") == 1  # a long skip reason in full once, then its first clause


def test_impact_is_scoped_to_where_it_held_and_to_a_suspect_run(roomy: str, docs: list[dict[str, Any]]) -> None:
    line = next(ln for ln in section(roomy, "graph-memset").splitlines() if ln.startswith("- Impact: "))
    assert line.startswith("- Impact: where it held: Graphs with many small cudaMemsetAsync nodes")
    here = "Here: +238 ns per op (919 ns against 681 ns); where it did not hold, per op: "
    assert here + "+1.19 us (pure CUDA twin, with work kernel); " in line
    # A row that ran the other way is said with both medians, so its saving reads against the headline's cost.
    assert line.endswith(
        "where it ran the other way, per op: -243 ns (torch graph, with matmul: 34.2 us against 34.4 us)."
    )
    doc = by_id(docs, "graph-memset")
    for row in doc["verdict"]["breakdown"]:
        row["status"] = "reproduced"
    held = next(ln for ln in report([doc]).splitlines() if ln.startswith("- Impact: "))
    assert held.startswith("- Impact: Graphs with many")  # it held everywhere measured: no scope to add
    doc["validity"] = {"flag": "suspect", "reasons": ["memset: clocks-event reasons hw_slowdown while measuring"]}
    suspect = next(ln for ln in report([doc]).splitlines() if ln.startswith("- Impact: "))
    assert suspect.startswith("- Impact: from a suspect run: Graphs with many")


def test_solve_says_where_in_the_stack_and_what_it_does_not_show(rendered: str, docs: list[dict[str, Any]]) -> None:
    line = next(ln for ln in section(rendered, "solve-512-cliff").splitlines() if "Where in the stack" in ln)
    assert line.startswith("- Where in the stack: `getrf_panel` gives way to `getrf_pivot<getrf_params_>` across")
    assert "lu_factor (aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp) sends" in line
    assert "(source read at pytorch/pytorch 7cf55ed6b736 and 006b3e67c188, not this build's)" in line
    # A batch of one (or a non-square matrix) takes looped cuSOLVER below 512 too.
    assert "a batch of one or a non-square matrix go to looped cuSOLVER getrf" in line
    # What it does not show is said once, under "Not tested here".
    assert "Not timed" not in line
    assert "looped cuSOLVER getrf at n=511 (a batch of one takes it)" in rendered.split("## Not tested here")[1]
    assert "never calls" not in line
    assert "Where in the stack" not in section(rendered, "graph-memset")  # declared by solve only
    doc = by_id(docs, "solve-512-cliff")
    doc["verdict"]["status"] = "not_reproduced"
    assert "Where in the stack" not in report([doc], declared=scripts.declared([doc]))
