"""Image readers without decoding pixels: a folder in, the image files used out; a file in, why it cannot be used out.

Also the facts the data pass and lowering share about a declared preprocessing: the tensor it
produces (dtype, shape) and its render-ready form with every default written out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compiler.front.model import PreprocessSpec

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")  # compared lower-cased, as the script does
CHANNELS = {"RGB": 3, "BGR": 3, "L": 1}
INTEGER_DTYPES = ("uint8", "int8")
DEFAULT_SCALE = 255.0
# 8-bit modes Pillow converts to RGB and L; 16-bit and float images would be clipped to 0..255 without a word.
EIGHT_BIT_MODES = ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr")


def image_files(folder: Path, limit: int | None) -> list[Path]:
    """The files an image reader will use, in the order it uses them."""
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())[:limit]


def image_problem(path: Path) -> str | None:
    """None when Pillow opens and verifies the file as an 8-bit image, else the reason. Pixels are not decoded."""
    # Imported here: Pillow costs ~0.1 s to import and only specs with an image reader need it.
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            mode = image.mode
            image.verify()  # structure and checksums (PNG CRCs), without decoding the pixels
    except UnidentifiedImageError:
        return "Pillow does not recognize it as an image"
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        # Pillow's messages may carry the absolute path; diagnostics name files relative to the spec.
        return (str(exc) or exc.__class__.__name__).replace(str(path), path.name)
    if mode not in EIGHT_BIT_MODES:
        return f"mode {mode} is not an 8-bit image mode; save it with 8 bits per channel"
    return None


def channels(preprocess: PreprocessSpec) -> int:
    return CHANNELS[preprocess.color]


def tensor_header(preprocess: PreprocessSpec) -> tuple[str, tuple[int, ...]]:
    """(dtype, shape) of one sample the preprocessing produces: [1, C, H, W] or [1, H, W, C]."""
    height, width = preprocess.resize
    c = channels(preprocess)
    shape = (1, c, height, width) if preprocess.layout == "NCHW" else (1, height, width, c)
    return preprocess.dtype, shape


def resolved(preprocess: PreprocessSpec) -> dict[str, Any]:
    """Every step written out for the script: float dtypes get their scale, mean and std; integer dtypes None."""
    floating = preprocess.dtype not in INTEGER_DTYPES
    c = channels(preprocess)
    return {
        "resize": list(preprocess.resize),
        "letterbox": preprocess.letterbox,  # the padding pixel value (aspect ratio kept), or None (stretched)
        "color": preprocess.color,
        "scale": (float(preprocess.scale) if preprocess.scale is not None else DEFAULT_SCALE) if floating else None,
        "mean": (([float(v) for v in preprocess.mean] if preprocess.mean is not None else [0.0] * c)
                 if floating else None),
        "std": (([float(v) for v in preprocess.std] if preprocess.std is not None else [1.0] * c)
                if floating else None),
        "layout": preprocess.layout,
        "dtype": preprocess.dtype,
    }
