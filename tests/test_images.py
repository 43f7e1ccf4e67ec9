"""Image-folder readers: schema and data-pass errors, the compiled plan, and the emitted reader's tensors against numpy.

The emitted ImageFolderReader runs in a subprocess (as the script would run it) and its arrays are
compared with a reference computed here from the declared preprocessing. One test runs a real
amd-quark search on CPU with image calibration.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from compiler.back.render import script_is_hand_edited
from compiler.commands.pipeline import compile_spec

from .conftest import EXAMPLE_DIR, needs_quark

TINYCNN = EXAMPLE_DIR / "models" / "tinycnn.onnx"

# Loads the compiled script as a module, builds its runtime reader for `calibration` or `eval_data` and saves what
# get_next() yields (and checks reset_iter starts over).
RUN_READER = """
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("compiled", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from qas_runtime.readers import make_reader, model_input_names
settings = module.SETTINGS
source = getattr(settings, sys.argv[2])
reader = make_reader(source, settings.here, model_input_names(settings.model_path))
samples = []
while (sample := reader.get_next()) is not None:
    assert list(sample) == [source["input"]], list(sample)
    samples.append(sample[source["input"]])
reader.reset_iter()
assert np.array_equal(reader.get_next()[source["input"]], samples[0])
np.savez(sys.argv[3], *samples)
"""


def identity_model(path: Path, dtype: str, shape: list) -> str:
    """A one-node ONNX model whose only input has that dtype and shape (str dims are dynamic)."""
    import onnx
    from onnx import helper

    elem = {"float32": onnx.TensorProto.FLOAT, "float16": onnx.TensorProto.FLOAT16,
            "uint8": onnx.TensorProto.UINT8, "int8": onnx.TensorProto.INT8}[dtype]
    x = helper.make_tensor_value_info("pixels", elem, shape)
    y = helper.make_tensor_value_info("out", elem, shape)
    graph = helper.make_graph([helper.make_node("Identity", ["pixels"], ["out"], name="same")], "identity", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path.name


def write_spec(folder: Path, model: str, calibration: str, extra: str = "") -> Path:
    spec = folder / "spec.yaml"
    spec.write_text(f"qas: 1\nname: imgs\nmodel: {model}\ncalibration:\n{calibration}{extra}"
                    "search: {preset: XINT8_SEARCH, n_trials: 3}\ndevice: cpu\n")
    return spec


def save_images(folder: Path, names: list[str], height: int, width: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random RGB images saved under those names; the pixel arrays (H, W, 3) returned by name."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arrays = {}
    for name in names:
        arrays[name] = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        Image.fromarray(arrays[name]).save(folder / name)
    return arrays


def reader_output(script: Path, which: str, tmp_path: Path) -> list[np.ndarray]:
    out = tmp_path / f"{which}.npz"
    ran = subprocess.run([sys.executable, "-c", RUN_READER, str(script), which, str(out)],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    with np.load(out) as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def reference(path: Path, resize: tuple[int, int], color: str = "RGB", layout: str = "NCHW", dtype: str = "float32",
              scale: float = 255.0, mean: list[float] | None = None, std: list[float] | None = None) -> np.ndarray:
    """The declared preprocessing written independently: Pillow decodes, converts and resizes; numpy does the rest."""
    with Image.open(path) as image:
        pixels = np.array(image.convert("L" if color == "L" else "RGB").resize((resize[1], resize[0]),
                                                                               Image.Resampling.BILINEAR))
    if pixels.ndim == 2:
        pixels = pixels[:, :, np.newaxis]
    if color == "BGR":
        pixels = pixels[:, :, [2, 1, 0]]
    if dtype == "uint8":
        out = pixels
    elif dtype == "int8":
        out = (pixels.astype(np.int64) - 128).astype(np.int8)
    else:
        channels = pixels.shape[2]
        m = np.array(mean if mean is not None else [0.0] * channels)
        s = np.array(std if std is not None else [1.0] * channels)
        out = ((pixels / scale - m) / s).astype(dtype)
    if layout == "NCHW":
        out = np.moveaxis(out, 2, 0)
    return out[np.newaxis]


def compiled_script(spec: Path) -> Path:
    ran = subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return next((spec.parent / "autosearch_output").glob("*_autosearch.py"))


# --- schema and data pass ----------------------------------------------------------------------------


def codes_and_messages(spec: Path) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in compile_spec(spec).diagnostics]


def test_limit_needs_a_folder_or_images_and_preprocess_needs_images(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, str(TINYCNN), "  reader: r.py:R\n  limit: 3\n",
                      "evaluation:\n  data: {folder: d, preprocess: {resize: [32, 32]}}\n")
    assert codes_and_messages(spec) == [
        ("QAS206", "calibration: 'limit' needs 'folder' or 'images'"),
        ("QAS206", "evaluation.data: 'preprocess' needs 'images'"),
    ]


def test_a_missing_image_folder_is_located(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, str(TINYCNN), "  images: nowhere\n  preprocess: {resize: [32, 32]}\n")
    (found,) = compile_spec(spec).diagnostics
    assert (found.code, found.message, found.line, found.col) == ("QAS301", "image folder 'nowhere' does not exist",
                                                                  5, 11)


def test_dynamic_dims_take_any_size_and_fixed_dims_are_checked(tmp_path: Path) -> None:
    save_images(tmp_path / "im", ["a.png"], 8, 8)
    model = identity_model(tmp_path / "dyn.onnx", "float16", ["batch", 3, "h", "w"])
    ok = write_spec(tmp_path, model, "  images: im\n  preprocess: {resize: [17, 9], dtype: float16}\n")
    assert compile_spec(ok).ok
    wrong = write_spec(tmp_path, model, "  images: im\n  preprocess: {resize: [17, 9], color: L, dtype: float16}\n")
    assert codes_and_messages(wrong) == [
        ("QAS714", "images preprocessed to float16 [1, 1, 17, 9] do not fit input 'pixels': "
                   "dim 1 is 1, the model wants 3 (shape [1, 1, 17, 9] vs ['batch', 3, 'h', 'w'])")]


def test_the_plan_writes_every_step_out_and_counts_the_images(tmp_path: Path) -> None:
    save_images(tmp_path / "im", ["b.png", "a.PNG", "c.jpg"], 32, 32)
    (tmp_path / "im" / "notes.txt").write_text("not an image\n")
    spec = write_spec(tmp_path, str(TINYCNN), "  images: im\n  limit: 2\n  preprocess: {resize: [32, 32]}\n",
                      "evaluation:\n  data:\n    images: im\n    input: input\n"
                      "    preprocess: {resize: [32, 32], color: BGR, scale: 1, mean: [1, 2, 3]}\n")
    result = compile_spec(spec)
    assert result.ok, result.diagnostics
    calibration, eval_data = result.plan.settings.calibration, result.plan.settings.eval_data
    assert calibration["preprocess"] == {"resize": [32, 32], "letterbox": None, "color": "RGB", "scale": 255.0,
                                         "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
                                         "layout": "NCHW", "dtype": "float32"}
    assert eval_data["preprocess"]["mean"] == [1.0, 2.0, 3.0] and eval_data["input"] == "input"
    assert json.loads(result.files["model_analysis.json"])["samples"] == {"calibration": 2, "evaluation": 3}
    plan = json.loads(result.files["quant_plan.json"])
    assert plan["settings"]["calibration"]["images"] == "../im"
    assert plan["settings"]["requirements"]["pillow"] == ">=10"
    script = result.files["imgs_autosearch.py"]
    assert not script_is_hand_edited(script)
    assert "'pillow': '>=10'," in script and "'images': '../im'," in script  # the script checks Pillow, reads images


def test_integer_dtypes_carry_no_normalization(tmp_path: Path) -> None:
    save_images(tmp_path / "im", ["a.png"], 8, 8)
    model = identity_model(tmp_path / "u8.onnx", "uint8", [1, 8, 8, 3])
    spec = write_spec(tmp_path, model, "  images: im\n  preprocess: {resize: [8, 8], layout: NHWC, dtype: uint8}\n")
    result = compile_spec(spec)
    assert result.ok, result.diagnostics
    steps = result.plan.settings.calibration["preprocess"]
    assert (steps["scale"], steps["mean"], steps["std"]) == (None, None, None)


def test_without_an_image_reader_nothing_about_images_reaches_the_outputs() -> None:
    result = compile_spec(EXAMPLE_DIR / "spec.yaml")
    assert "pillow" not in result.plan.settings.requirements
    script = result.files["tinycnn_autosearch.py"]
    assert "PIL" not in script and "ImageFolderReader" not in script
    plan = json.loads(result.files["quant_plan.json"])
    assert "preprocess" not in plan["settings"]["calibration"] and "input" not in plan["settings"]["eval_data"]


# --- the emitted reader --------------------------------------------------------------------------------


CASES = {
    # name: (model dtype, model shape, preprocess YAML, reference keyword arguments)
    "rgb_nchw_float32_normalized": ("float32", [1, 3, 24, 20],
                                    "{resize: [24, 20], mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}",
                                    {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}),
    "bgr_nhwc_float16_scaled": ("float16", ["n", 24, 20, 3],
                                "{resize: [24, 20], color: BGR, layout: NHWC, dtype: float16, scale: 1, "
                                "mean: [100, 110, 120], std: [50, 60, 70]}",
                                {"color": "BGR", "layout": "NHWC", "dtype": "float16", "scale": 1.0,
                                 "mean": [100, 110, 120], "std": [50, 60, 70]}),
    "gray_nchw_uint8": ("uint8", [1, 1, 24, 20], "{resize: [24, 20], color: L, dtype: uint8}",
                        {"color": "L", "dtype": "uint8"}),
    "rgb_nhwc_int8": ("int8", [1, 24, 20, 3], "{resize: [24, 20], layout: NHWC, dtype: int8}",
                      {"layout": "NHWC", "dtype": "int8"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_emitted_reader_yields_exactly_the_declared_tensors(case: str, tmp_path: Path) -> None:
    dtype, shape, preprocess, kwargs = CASES[case]
    # 40x50 images resized to 24x20, files out of creation order, an upper-case .JPG and a file that is no image
    save_images(tmp_path / "im", ["c.png", "a.png", "b.bmp"], 40, 50)
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (30, 30, 3),
                                                      dtype=np.uint8)).save(tmp_path / "im" / "d.JPG")
    (tmp_path / "im" / "e.txt").write_text("ignored\n")
    model = identity_model(tmp_path / "m.onnx", dtype, shape)
    spec = write_spec(tmp_path, model, f"  images: im\n  preprocess: {preprocess}\n")
    got = reader_output(compiled_script(spec), "calibration", tmp_path)
    files = ["a.png", "b.bmp", "c.png", "d.JPG"]
    assert len(got) == len(files)
    for name, array in zip(files, got, strict=True):
        want = reference(tmp_path / "im" / name, (24, 20), **kwargs)
        assert array.dtype == want.dtype and array.shape == want.shape, name
        if dtype == "float32":
            np.testing.assert_allclose(array, want, rtol=1e-6, atol=1e-6, err_msg=name)
        elif dtype == "float16":
            np.testing.assert_allclose(array.astype(np.float64), want.astype(np.float64), rtol=1e-3, atol=1e-3,
                                       err_msg=name)
        else:
            assert np.array_equal(array, want), name


def test_without_resizing_the_tensors_are_the_saved_pixels(tmp_path: Path) -> None:
    arrays = save_images(tmp_path / "im", ["a.png", "b.png"], 16, 12)
    model = identity_model(tmp_path / "m.onnx", "float32", [1, 3, 16, 12])
    spec = write_spec(tmp_path, model, "  images: im\n  limit: 1\n"
                      "  preprocess: {resize: [16, 12], mean: [0.5, 0.5, 0.5], std: [0.25, 0.5, 1]}\n")
    (got,) = reader_output(compiled_script(spec), "calibration", tmp_path)
    want = ((arrays["a.png"].astype(np.float32) / np.float32(255) - np.float32(0.5))
            / np.array([0.25, 0.5, 1], np.float32))
    assert np.array_equal(got, want.transpose(2, 0, 1)[np.newaxis])


PHOTO = Path(__import__("matplotlib").get_data_path()) / "sample_data" / "grace_hopper.jpg"  # a real 512x600 JPEG


@pytest.mark.parametrize(("resize", "pad"), [((64, 48), 114), ((40, 96), 0)])
def test_letterbox_keeps_the_aspect_ratio_and_pads_a_real_photo(resize: tuple[int, int], pad: int,
                                                                 tmp_path: Path) -> None:
    """A portrait photo letterboxed into a landscape and a narrower portrait box: the photo, scaled by one ratio,
    sits centred, and every other pixel is the pad value (before mean/std), per channel."""
    (tmp_path / "im").mkdir()
    (tmp_path / "im" / "photo.jpg").write_bytes(PHOTO.read_bytes())
    height, width = resize
    model = identity_model(tmp_path / "m.onnx", "float32", [1, 3, height, width])
    spec = write_spec(tmp_path, model, f"  images: im\n  preprocess: {{resize: [{height}, {width}], "
                                       f"letterbox: {{pad: {pad}}}, mean: [0.5, 0.5, 0.5]}}\n")
    result = compile_spec(spec)
    assert result.ok and result.plan.settings.calibration["preprocess"]["letterbox"] == pad, result.diagnostics
    (got,) = reader_output(compiled_script(spec), "calibration", tmp_path)
    with Image.open(PHOTO) as image:
        rgb = image.convert("RGB")
    ratio = min(height / rgb.height, width / rgb.width)
    inner_w, inner_h = round(rgb.width * ratio), round(rgb.height * ratio)
    assert abs(inner_w / inner_h - rgb.width / rgb.height) < 0.05  # the aspect ratio is kept
    left, top = (width - inner_w) // 2, (height - inner_h) // 2
    want = np.full((height, width, 3), pad, np.uint8)
    want[top:top + inner_h, left:left + inner_w] = np.asarray(rgb.resize((inner_w, inner_h), Image.Resampling.BILINEAR))
    expected = (want.astype(np.float32) / np.float32(255) - np.float32(0.5)).transpose(2, 0, 1)[np.newaxis]
    assert got.shape == (1, 3, height, width) and np.array_equal(got, expected)
    padded = np.ones((height, width), bool)
    padded[top:top + inner_h, left:left + inner_w] = False
    assert padded.sum() > 0 and np.all(got[0][:, padded] == np.float32(pad) / np.float32(255) - np.float32(0.5))


def test_letterbox_refuses_a_pad_outside_0_255(tmp_path: Path) -> None:
    save_images(tmp_path / "im", ["a.png"], 8, 8)
    spec = write_spec(tmp_path, str(TINYCNN), "  images: im\n  preprocess: {resize: [32, 32], letterbox: {pad: 256}}\n")
    assert [c for c, _ in codes_and_messages(spec)] == ["QAS205"]


def test_an_image_that_cannot_be_decoded_stops_the_script_naming_it(tmp_path: Path) -> None:
    save_images(tmp_path / "im", ["a.jpg"], 32, 32)
    spec = write_spec(tmp_path, str(TINYCNN), "  images: im\n  preprocess: {resize: [32, 32]}\n")
    script = compiled_script(spec)
    data = (tmp_path / "im" / "a.jpg").read_bytes()
    (tmp_path / "im" / "a.jpg").write_bytes(data[: len(data) // 2])  # truncated after compile: JPEG verify is shallow
    ran = subprocess.run([sys.executable, "-c", RUN_READER, str(script), "calibration", str(tmp_path / "x.npz")],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2
    assert (ran.stderr.startswith("qas: error: image ")
            and "im/a.jpg cannot be read: image file is truncated" in ran.stderr)
    assert "Traceback" not in ran.stderr


# --- end to end with the real amd-quark -----------------------------------------------------------------


@pytest.mark.e2e
@needs_quark
def test_a_search_calibrated_on_png_images_runs_on_the_declared_tensors(example_copy: Path, tmp_path: Path) -> None:
    images = example_copy / "data" / "images"
    images.mkdir()
    pixels = []
    for i, sample in enumerate(sorted((example_copy / "data" / "calib").glob("*.npy"))[:4]):
        hwc = np.round(np.load(sample)[0].transpose(1, 2, 0) * 255).astype(np.uint8)  # [1, 3, 32, 32] in [0, 1)
        Image.fromarray(hwc).save(images / f"calib_{i}.png")
        pixels.append(hwc)
    spec = example_copy / "spec.yaml"
    spec.write_text("""qas: 1
name: pngs
model: models/tinycnn.onnx
calibration:
  images: data/images
  input: input
  preprocess: {resize: [32, 32], layout: NCHW, color: RGB, scale: 255, dtype: float32}
evaluation: {metric: L2}
search:
  space:
    activation: [Int8Spec]
    activation_params:
      calibration_method: [MinMax, Percentile]
      only_if: activation
    weight: [Int8Spec]
    weight_params:
      symmetric: [true, false]
      only_if: weight
  sampler: TPE
  seed: 0
  n_trials: 2
device: cpu
""")
    script = compiled_script(spec)
    got = reader_output(script, "calibration", tmp_path)
    want = [(p.astype(np.float32) / np.float32(255)).transpose(2, 0, 1)[np.newaxis] for p in pixels]
    assert len(got) == 4 and all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    best = json.loads((script.parent / "best_config.json").read_text())
    assert best["trials_complete"] == 2
    assert (script.parent / "best_model.onnx").is_file()
