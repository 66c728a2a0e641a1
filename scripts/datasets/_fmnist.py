"""Shared helpers for the Fashion-MNIST based dataset scripts in this folder.

Not a script: fashion_mnist_to_folder.py and make_cifar_binary.py import it (Python puts a
script's own directory first on sys.path, so a plain `import _fmnist` works from anywhere).

What lives here:
  * read_idx(): Fashion-MNIST / MNIST IDX files, gzip or plain.
  * load_split(): images + labels of "train" or "t10k", checked against each other.
  * colourize(): the deterministic per-image colouring both scripts use, so image i of a split
    gets the same colours in the ImageFolder and in the CIFAR-format output.

Randomness is a splitmix64 hash of (seed, split, image index, draw number) computed with numpy
uint64 arithmetic, not numpy's Generator: it depends on nothing but these integers, so the
colours are the same for any number of workers, any chunking and any numpy version.
"""

import gzip
import os
import struct
import sys

from _common import fail

try:
    import numpy as np
except ImportError:  # pragma: no cover - depends on the machine
    sys.stderr.write("error: numpy is not installed for %s (Debian: apt-get install python3-numpy)\n"
                     % sys.executable)
    sys.exit(1)

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"

# Fashion-MNIST's label order (https://github.com/zalandoresearch/fashion-mnist#labels).
CLASS_NAMES = ["t-shirt_top", "trouser", "pullover", "dress", "coat",
               "sandal", "shirt", "sneaker", "bag", "ankle_boot"]

# Directory names "<label>_<name>": with a single-digit prefix, sorting the names (as
# torchvision's ImageFolder does) gives back labels 0..9 in order.
CLASS_DIRS = ["%d_%s" % (i, n) for i, n in enumerate(CLASS_NAMES)]

SPLIT_ID = {"train": 0, "t10k": 1}


def _find(directory, stem):
    """`stem`.gz or plain `stem` in directory; fail naming the .gz if neither exists."""
    gz = os.path.join(directory, stem + ".gz")
    plain = os.path.join(directory, stem)
    if os.path.isfile(gz):
        return gz
    if os.path.isfile(plain):
        return plain
    fail("missing input file: %s (or %s)" % (gz, plain))


def read_idx(path):
    """An IDX file (gzip or plain) as a uint8 numpy array shaped by its header."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        fail("cannot read %s: %s" % (path, e))
    if len(data) < 4:
        fail("%s: too short for an IDX header" % path)
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        fail("%s: not an unsigned-byte IDX file (magic %02x%02x%02x%02x)" % ((path,) + tuple(data[:4])))
    header = 4 + 4 * ndim
    dims = struct.unpack(">%dI" % ndim, data[4:header])
    count = 1
    for d in dims:
        count *= d
    if len(data) - header != count:
        fail("%s: header says %s (%d bytes) but the file holds %d bytes of data"
             % (path, "x".join(map(str, dims)), count, len(data) - header))
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def load_split(directory, split, limit=None):
    """(images uint8 [n,28,28], labels uint8 [n]) of split "train" or "t10k", first `limit`."""
    images = read_idx(_find(directory, "%s-images-idx3-ubyte" % split))
    labels = read_idx(_find(directory, "%s-labels-idx1-ubyte" % split))
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        fail("%s split in %s: images %s and labels %s do not match"
             % (split, directory, images.shape, labels.shape))
    if labels.size and int(labels.max()) >= len(CLASS_NAMES):
        fail("%s split in %s: label %d out of range 0..9" % (split, directory, int(labels.max())))
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    return images, labels


# --------------------------------------------------------------------------- randomness

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def uniform(seed, split_id, indices, draws):
    """float64 [len(indices), draws] in [0, 1): a hash of (seed, split, index, draw)."""
    with np.errstate(over="ignore"):
        base = _splitmix64(np.uint64(seed & 0xFFFFFFFFFFFFFFFF))
        base = _splitmix64(base ^ np.uint64(split_id))
        idx = np.asarray(indices, dtype=np.uint64)[:, None]
        k = np.arange(draws, dtype=np.uint64)[None, :]
        h = _splitmix64(_splitmix64(base ^ idx) ^ (k * np.uint64(0xD1B54A32D192ED03)))
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _hsv_to_rgb(h, s, v):
    """Vectorised HSV -> RGB, all arrays in [0, 1]; returns [..., 3]."""
    i = np.floor(h * 6.0)
    f = h * 6.0 - i
    p = v * (1.0 - s)
    q = v * (1.0 - s * f)
    t = v * (1.0 - s * (1.0 - f))
    i = i.astype(np.int64) % 6
    r = np.choose(i, [v, q, p, p, t, v])
    g = np.choose(i, [t, v, v, q, p, p])
    b = np.choose(i, [p, p, t, v, v, q])
    return np.stack([r, g, b], axis=-1)


def colourize(images, seed, split_id, indices):
    """Grey [n,H,W] uint8 -> RGB [n,H,W,3] uint8, colours fixed by (seed, split, index).

    Each image gets a garment colour (any hue, saturation 0.45-1) and a background colour whose
    hue is 0.2-0.8 of the way round the colour wheel from it; half the images have a dark
    background and a bright garment, half a light background and a darker garment, so garment
    and background always differ clearly. The grey level g/255 blends background (0) to garment
    colour (255) linearly, so the garment's shape and texture survive untouched; the colours
    carry no information about the label.
    """
    n = images.shape[0]
    u = uniform(seed, split_id, indices, 6)
    dark = u[:, 5] < 0.5  # half dark backgrounds (bright garment), half light ones (darker garment)
    fg_h = u[:, 0]
    fg_v = np.where(dark, 0.6 + 0.4 * u[:, 2], 0.3 + 0.45 * u[:, 2])
    fg = _hsv_to_rgb(fg_h, 0.45 + 0.55 * u[:, 1], fg_v)
    bg_h = (fg_h + 0.2 + 0.6 * u[:, 3]) % 1.0
    bg_v = np.where(dark, 0.05 + 0.30 * u[:, 4], 0.75 + 0.25 * u[:, 4])
    bg_s = np.where(dark, 0.3 + 0.7 * u[:, 4], 0.1 + 0.4 * u[:, 4])
    bg = _hsv_to_rgb(bg_h, bg_s, bg_v)
    a = images.astype(np.float32)[..., None] * np.float32(1.0 / 255.0)  # [n,H,W,1]
    fg = fg.astype(np.float32).reshape(n, 1, 1, 3)
    bg = bg.astype(np.float32).reshape(n, 1, 1, 3)
    out = (bg + (fg - bg) * a) * np.float32(255.0) + np.float32(0.5)
    return np.clip(out, 0, 255).astype(np.uint8)
