"""The program pages in a real browser (the ``browser`` and ``artifacts`` fixtures are in
tests/conftest.py). The measured load times go to the artifacts with the screenshots; nothing
here asserts a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner

from anekit.cli import cli


def _open(browser: Any, page_file: Path) -> tuple[Any, float]:
    """The page opened from disk, its script run; and its load time in ms (navigation
    start to the load event, as the browser measured it)."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(page_file.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    timing = page.evaluate(
        "() => { const [n] = performance.getEntriesByType('navigation');"
        " return n.loadEventEnd - n.startTime; }"
    )
    return page, float(timing)


def _record(artifacts: Path, name: str, **figures: Any) -> None:
    path = artifacts / "page-load-times.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    known[name] = figures
    path.write_text(json.dumps(known, indent=2, sort_keys=True) + "\n")


def _visible_rows(page: Any, panel: int) -> int:
    return int(page.locator(f"[data-panel='{panel}'] tr.op:not(.hidden)").count())


def test_the_minilm_package_page(browser: Any, artifacts: Path, tmp_path: Path) -> None:
    from anekit.models.encoders import EncoderOptions, load_model, package_of

    # the package the fp16 tests share (built once a run), without opening an encoder
    package = package_of(load_model(None, max_length=512), EncoderOptions("fp16")).path
    out = tmp_path / "minilm.html"
    done = CliRunner().invoke(
        cli, ["doctor", str(package), "--html", str(out), "--no-simulate", "--json"]
    )
    assert done.exit_code == 0, done.output
    second = json.loads(done.stdout)["functions"][1]  # the JSON the page was made from
    softmaxes = sum(op["type"] == "softmax" and op["compute"] for op in second["ops"])
    page, load_ms = _open(browser, out)
    page.screenshot(path=str(artifacts / "doctor-minilm.png"))
    tabs = page.locator("#function-tabs [role='tab']")
    assert tabs.count() == 6  # one per bucket, in order
    assert [tab.split()[0] for tab in tabs.all_inner_texts()] == [
        f"seq{size}" for size in (128, 192, 256, 320, 384, 512)
    ]
    assert _visible_rows(page, 0) == 675  # the compute ops; constants hidden
    badges = page.locator("[data-panel='0'] tr.op:not(.hidden) [data-device='ane']")
    assert badges.count() == 675 * 3  # every compute op on the ANE, in each family
    assert page.locator("[data-panel='1']").is_hidden()
    tabs.nth(1).click()
    assert page.locator("[data-panel='1']").is_visible()
    assert page.locator("[data-panel='0']").is_hidden()
    panel = page.locator("[data-panel='1']")
    panel.locator(".filter").fill("softmax")
    page.wait_for_function(
        "n => document.querySelector(\"[data-panel='1'] .shown\").textContent"
        ".startsWith(n + ' of')",
        arg=softmaxes,
    )  # after the filter's debounce: the softmax ops alone (one per head and layer)
    assert softmaxes == 72 and _visible_rows(page, 1) == softmaxes
    panel.locator(".only-off").check()
    assert _visible_rows(page, 1) == 0
    _record(artifacts, "doctor-minilm", load_ms=load_ms, bytes=out.stat().st_size, ops=6 * 856)
    page.close()


def test_the_page_of_a_program_built_to_overflow(
    browser: Any, artifacts: Path, tmp_path: Path
) -> None:
    (tmp_path / "over.py").write_text(
        "import numpy as np\n\n"
        "def f(x, w):\n"
        "    zeroed = np.maximum(x @ w, 0.0) * 0.0\n"
        "    h = (x @ w) * 1000.0\n"
        "    return h * h + zeroed\n"
    )
    out = tmp_path / "over.html"
    shapes = ["--shape", "x=4,64", "--shape", "w=64,64"]
    target = f"{tmp_path / 'over.py'}:f"
    done = CliRunner().invoke(cli, ["doctor", target, *shapes, "--html", str(out)])
    assert done.exit_code == 1, done.output  # falls back: too small a program
    page, _ = _open(browser, out)
    first = page.locator("tr.first-nonfinite")
    assert first.count() == 1 and first.is_visible()
    assert first.locator(".badge.first").inner_text() == "first inf/NaN"
    assert "inf/NaN" in first.locator(".nonfinite").inner_text()
    assert page.locator(".overflow").is_visible()  # the numerics section names it too
    page.locator(".only-problems").check()
    shown = page.locator("tr.op:not(.hidden)")
    assert shown.count() >= 2  # the overflow and the output zeroed
    assert all(row.get_attribute("data-problem") == "1" for row in shown.all())
    page.screenshot(path=str(artifacts / "doctor-overflow.png"), full_page=True)
    page.close()


def _whisper_weights(config: Any) -> dict[str, np.ndarray]:
    """Random weights under the names a Whisper checkpoint's encoder uses."""
    rng = np.random.default_rng(0)
    d, f, mel = config.d_model, config.ffn_dim, config.mel_bins

    def normal(*shape: int) -> np.ndarray:
        return (0.02 * rng.standard_normal(shape)).astype(np.float32)

    weights = {
        "conv1.weight": normal(d, mel, 3),
        "conv1.bias": normal(d),
        "conv2.weight": normal(d, d, 3),
        "conv2.bias": normal(d),
        "embed_positions.weight": normal(config.positions, d),
        "layer_norm.weight": 1 + normal(d),
        "layer_norm.bias": normal(d),
    }
    for index in range(config.layers):
        prefix = f"layers.{index}."
        linear = {"self_attn.q_proj": (d, d), "self_attn.v_proj": (d, d)}
        linear |= {"self_attn.out_proj": (d, d), "fc1": (f, d), "fc2": (d, f)}
        for name, shape in linear.items():
            weights[f"{prefix}{name}.weight"] = normal(*shape)
            weights[f"{prefix}{name}.bias"] = normal(shape[0])
        weights[f"{prefix}self_attn.k_proj.weight"] = normal(d, d)
        for name in ("self_attn_layer_norm", "final_layer_norm"):
            weights[f"{prefix}{name}.weight"] = 1 + normal(d)
            weights[f"{prefix}{name}.bias"] = normal(d)
    return weights


def test_the_page_of_a_whisper_encoder_at_its_real_shape(
    browser: Any, artifacts: Path, tmp_path: Path
) -> None:
    from anekit.analysis import analyze
    from anekit.models import whisper

    # whisper-tiny's encoder (4 layers, 384 wide) on the 30-second window: 3000 frames,
    # 1500 positions, attention in three query chunks per head
    config = whisper.WhisperEncoderConfig(
        d_model=384, layers=4, heads=6, ffn_dim=1536, mel_bins=80, positions=1500
    )
    program = whisper.trace(config, _whisper_weights(config))
    report = analyze(program)
    out = tmp_path / "whisper.html"
    out.write_text(report.to_html(passes=program.pass_report))
    page, load_ms = _open(browser, out)
    page.screenshot(path=str(artifacts / "doctor-whisper-encoder.png"))
    compute = len(report.functions[0].compute_ops())
    assert _visible_rows(page, 0) == compute
    assert page.locator("#passes > ul > li").count() == len(program.pass_report.results) + len(
        program.pass_report.skipped
    )
    page.locator(".filter").fill("matmul")
    matmuls = sum(op.op_type == "matmul" for op in report.functions[0].compute_ops())
    page.wait_for_function(
        f"() => document.querySelector('.shown').textContent.startsWith('{matmuls} of')"
    )
    _record(
        artifacts, "doctor-whisper-encoder", load_ms=load_ms, bytes=out.stat().st_size, ops=compute
    )
    page.close()
