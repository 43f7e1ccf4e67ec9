"""Sample readers: a reader description from the settings in; an object Quark can read (get_next until None) out."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any

from .checks import fail

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")  # compared lower-cased


def model_input_names(model_path: Path) -> list[str]:
    """The graph inputs a sample must feed (initializers excluded); external data is not loaded."""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


class SampleList:
    """Samples read up front, handed out one by one (Quark's reader protocol: get_next until None)."""

    samples: list[dict[str, Any]]
    position = 0

    def get_next(self) -> dict[str, Any] | None:
        if self.position >= len(self.samples):
            return None
        self.position += 1
        return self.samples[self.position - 1]

    def rewind(self) -> None:
        self.position = 0

    reset_iter = rewind  # the name Quark's own readers use


def samples_of(reader: Any) -> list[dict[str, Any]]:
    """A Quark reader (get_next until None, reset_iter) in; its samples out, the reader rewound."""
    reader.reset_iter()
    samples = []
    while (sample := reader.get_next()) is not None:
        samples.append(sample)
    reader.reset_iter()
    return samples


def sample_paths(folder: Path, limit: int | None) -> list[Path]:
    """The sample files a folder reader uses, in its order (labels of .npz samples are read in the same order)."""
    return sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz"))[:limit]


class FolderReader(SampleList):
    """Samples from a folder in name order: .npy for single-input models, .npz keyed by input name."""

    def __init__(self, folder: Path, input_names: list[str], limit: int | None) -> None:
        import numpy as np

        if not folder.is_dir():
            fail(f"no sample folder {folder} (compile checked it; was it moved?)")
        files = sample_paths(folder, limit)
        if not files:
            fail(f"no .npy or .npz samples in {folder}")
        self.samples = []
        for path in files:
            if path.suffix == ".npy":
                if len(input_names) != 1:
                    fail(f"{path} is a .npy sample, but the model has inputs {input_names}: use .npz")
                self.samples.append({input_names[0]: np.load(path)})
            else:
                with np.load(path) as arrays:
                    missing = [n for n in input_names if n not in arrays.files]
                    if missing:
                        fail(f"{path} lacks model inputs {missing}")
                    self.samples.append({n: arrays[n] for n in input_names})


def preprocess_image(path: Path, steps: dict[str, Any]) -> Any:
    """One image file in, one [1, C, H, W] or [1, H, W, C] array out, made exactly as the spec declares."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as image:  # EXIF orientation is not applied: pixels as stored
        image = image.convert("L" if steps["color"] == "L" else "RGB")  # alpha is dropped
        height, width = steps["resize"]
        if steps.get("letterbox") is None:
            image = image.resize((width, height), Image.Resampling.BILINEAR)  # antialiased when shrinking
        else:
            image = letterbox(image, height, width, steps["letterbox"])
        pixels = np.asarray(image, dtype=np.uint8).reshape(height, width, -1)  # H, W, C
    if steps["color"] == "BGR":
        pixels = pixels[:, :, ::-1]
    if steps["dtype"] == "uint8":
        array = pixels
    elif steps["dtype"] == "int8":
        array = (pixels.astype(np.int16) - 128).astype(np.int8)
    else:  # float32 / float16: computed in float32, cast last
        array = pixels.astype(np.float32) / np.float32(steps["scale"])
        array = (array - np.asarray(steps["mean"], np.float32)) / np.asarray(steps["std"], np.float32)
        array = array.astype(steps["dtype"])
    if steps["layout"] == "NCHW":
        array = array.transpose(2, 0, 1)
    return np.ascontiguousarray(array[np.newaxis])


def letterbox(image: Any, height: int, width: int, pad: int) -> Any:
    """A Pillow image in; it scaled to fit inside height x width with its aspect ratio kept (bilinear), centred on a
    canvas of that size filled with `pad` in every channel, out (YOLO's letterbox: the extra pixel of an odd
    margin goes to the bottom and the right)."""
    from PIL import Image

    ratio = min(height / image.height, width / image.width)
    inner = (max(1, min(width, round(image.width * ratio))), max(1, min(height, round(image.height * ratio))))
    resized = image.resize(inner, Image.Resampling.BILINEAR)
    canvas = Image.new(image.mode, (width, height), pad if image.mode == "L" else (pad,) * len(image.getbands()))
    canvas.paste(resized, ((width - inner[0]) // 2, (height - inner[1]) // 2))
    return canvas


class ImageFolderReader(SampleList):
    """Images from a folder in name order, each preprocessed to one batch-of-one sample."""

    def __init__(self, folder: Path, input_names: list[str], input_name: str, limit: int | None,
                 steps: dict[str, Any]) -> None:
        if input_names != [input_name]:
            fail(f"the images in {folder} feed input {input_name!r}, but the model's inputs are {input_names}")
        if not folder.is_dir():
            fail(f"no image folder {folder} (compile checked it; was it moved?)")
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())[:limit]
        if not files:
            fail(f"no {', '.join(IMAGE_SUFFIXES)} images in {folder}")
        self.samples = []
        for path in files:
            try:
                self.samples.append({input_name: preprocess_image(path, steps)})
            except (OSError, SyntaxError, ValueError) as error:  # Pillow's errors for a broken file
                fail(f"image {path} cannot be read: {error}")


def load_user_object(file: Path, name: str) -> Any:
    """Import a user's file by its resolved path (its folder goes on sys.path for its own imports) and get `name`.

    The path is resolved first, so the module's __file__ and its tracebacks name the file itself, never
    `<out>/../evals.py`; an error while importing it stops the script with that error and its traceback."""
    file = Path(file).resolve()
    sys.path.insert(0, str(file.parent))
    module_spec = importlib.util.spec_from_file_location(f"qas_user_{file.stem}", file)
    if module_spec is None or module_spec.loader is None:
        fail(f"cannot import {file}")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - the user's module: its error, with its traceback, is the message
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__.tb_next)).rstrip("\n")
        fail(f"importing {file} failed: {type(error).__name__}: {error}\n{trace}")
    if not hasattr(module, name):
        fail(f"{file} defines no {name!r}")
    return getattr(module, name)


def make_reader(source: dict[str, Any], here: Path, input_names: list[str]) -> Any:
    """A reader description (paths relative to `here`) and the model's inputs in; a sample reader out."""
    if "folder" in source:
        return FolderReader(here / source["folder"], input_names, source["limit"])
    if "images" in source:
        return ImageFolderReader(here / source["images"], input_names, source["input"], source["limit"],
                                 source["preprocess"])
    return load_user_object(here / source["file"], source["class"])(**source["args"])
