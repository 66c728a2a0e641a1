#!/usr/bin/env python3
"""A synthetic ImageNet-like JPEG folder, for data-loading and decoding benchmarks.

Writes torchvision's ImageFolder layout with ImageNet's file characteristics, so that the JPEG
decode + RandomResizedCrop pipeline can be measured (Convoy against PyTorch's DataLoader)
without ImageNet:

    OUT/train/<class>/<class>_<i>.jpg    --classes x --train-per-class images
    OUT/val/<class>/<class>_<i>.jpg      --classes x --val-per-class images

<class> is n00000000, n00000001, ... (WordNet-id style; sorting gives the class order) and <i>
is zero padded to 5 digits.

Each image is a baseline JPEG, quality --quality (90), 4:2:0 chroma subsampling, of random size:
the long side is 500 for half the images (ImageNet's most common size) and uniform in
[--min-size, --max-size] for the rest, the aspect ratio photo-like (4:3 most often, also 3:2,
1:1, 5:4, 16:9; a quarter portrait), and the short side clamped to [--min-size, long side].

The content is meant to compress like a photograph, not to be recognisable: a smooth colour
field (a few random colours, bicubic-upsampled), some filled ellipses, rectangles and triangles,
a slight blur, then grain: luminance noise at 1/4, 1/2 and full resolution plus a little colour
noise at 1/2, its strength varying per image. Pure noise would make unrealistically large JPEGs
and flat colour unrealistically small ones; this gives ~120 KB for a 500x375 image at quality 90
(80-150 KB), and ~100 KB on average over the random sizes, about ImageNet's average of 110 KB.
The colour field takes its colours from a per-class palette, so classes differ a little in
colour statistics, but the set is not meant for accuracy runs.

Deterministic for a given --seed, whatever --workers: every image has its own random generator
seeded from (seed, split, class, index). Bytes can differ across numpy, Pillow or libjpeg
versions. At the end it prints the image count, total and average size.

Example:
    scripts/datasets/make_imagenet_like.py --out /tmp/imagenet-like --workers 16
    scripts/datasets/make_imagenet_like.py --out /tmp/in-small --classes 10 \\
        --train-per-class 20 --val-per-class 5
"""

import argparse
import io
import os
import shutil
import sys
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import fail, progress, run_tasks  # noqa: E402


try:
    import numpy as np
except ImportError:  # pragma: no cover - depends on the machine
    fail("numpy is not installed for %s (Debian: apt-get install python3-numpy)" % sys.executable)
try:
    from PIL import Image, ImageDraw, ImageFilter
except ImportError:  # pragma: no cover - depends on the machine
    fail("Pillow is not installed for %s (Debian: apt-get install python3-pil)" % sys.executable)

BICUBIC = getattr(Image, "Resampling", Image).BICUBIC

SPLITS = [("train", 0), ("val", 1)]

# (width:height of the long:short side, weight)
ASPECTS = [(4 / 3, 0.55), (3 / 2, 0.15), (1.0, 0.10), (5 / 4, 0.10), (16 / 9, 0.10)]

# Noise standard deviations (in 0..255 units) at 1/4, 1/2 and full resolution, before the
# per-image strength factor (0.6-1.4); tuned so a 500x375 image averages ~120 KB at quality 90.
NOISE_QUARTER = 12.0
NOISE_HALF = 40.0
NOISE_FULL = 20.0
NOISE_COLOUR = 10.0  # per-channel noise at 1/2 resolution


def class_name(c):
    return "n%08d" % c


def image_size(rng, min_size, max_size):
    """(width, height) of one image."""
    if rng.random() < 0.5 and min_size <= 500 <= max_size:
        long_side = 500
    else:
        long_side = int(rng.integers(min_size, max_size + 1))
    weights = np.array([w for _, w in ASPECTS])
    aspect = ASPECTS[int(rng.choice(len(ASPECTS), p=weights / weights.sum()))][0]
    short_side = min(max(int(round(long_side / aspect)), min_size), long_side)
    if rng.random() < 0.25:
        return short_side, long_side
    return long_side, short_side


def _noise_layer(rng, w, h, factor, sigma, channels):
    """Gaussian noise drawn at 1/factor resolution, bicubic-upsampled to w x h: float32 [h,w,c]."""
    sw, sh = w // factor + 2, h // factor + 2
    n = rng.standard_normal((sh, sw, channels), dtype=np.float32) * np.float32(sigma / 2.0)
    small = np.clip(n + np.float32(128.0), 0, 255).astype(np.uint8)
    small = small if channels == 3 else np.ascontiguousarray(small[..., 0])
    big = Image.fromarray(small).resize((w, h), BICUBIC)  # uint8: L or RGB by shape
    out = np.asarray(big, dtype=np.float32) - np.float32(128.0)
    out *= np.float32(2.0)
    return out if channels == 3 else out[..., None]


def make_image(rng, palette, w, h):
    """One synthetic photo-like RGB image."""
    gw, gh = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    picks = palette[rng.integers(0, len(palette), size=gh * gw)]
    grid = np.clip(picks + rng.normal(0.0, 35.0, size=picks.shape), 0, 255)
    img = Image.fromarray(grid.reshape(gh, gw, 3).astype(np.uint8)).resize((w, h), BICUBIC)

    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(3, 10))):
        sw = int(rng.integers(w // 10, w // 2))
        sh = int(rng.integers(h // 10, h // 2))
        x0 = int(rng.integers(-sw // 2, w))
        y0 = int(rng.integers(-sh // 2, h))
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        kind = int(rng.integers(0, 3))
        if kind == 0:
            draw.ellipse([x0, y0, x0 + sw, y0 + sh], fill=colour)
        elif kind == 1:
            draw.rectangle([x0, y0, x0 + sw, y0 + sh], fill=colour)
        else:
            pts = [(x0 + int(rng.integers(0, sw)), y0 + int(rng.integers(0, sh))) for _ in range(3)]
            draw.polygon(pts, fill=colour)
    img = img.filter(ImageFilter.GaussianBlur(1.0))

    a = np.asarray(img, dtype=np.float32)
    strength = float(rng.uniform(0.6, 1.4))  # busy and calm photos
    # Mostly luminance texture, as in photos; a little colour noise at half resolution.
    a = a + _noise_layer(rng, w, h, 4, NOISE_QUARTER * strength, 1)
    a += _noise_layer(rng, w, h, 2, NOISE_HALF * strength, 1)
    a += _noise_layer(rng, w, h, 2, NOISE_COLOUR * strength, 3)
    a += rng.standard_normal((h, w, 1), dtype=np.float32) * np.float32(NOISE_FULL * strength)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def _class_palette(seed, c):
    rng = np.random.default_rng([seed, 2, c])
    return rng.integers(0, 256, size=(4, 3)).astype(np.float64)


def _write_class(task):
    """Worker: all images of one (split, class); returns (count, bytes, pixels)."""
    out, split, split_id, c, count, a = task
    palette = _class_palette(a["seed"], c)
    cdir = os.path.join(out, split, class_name(c))
    nbytes = npix = 0
    for i in range(count):
        rng = np.random.default_rng([a["seed"], split_id, c, i])
        w, h = image_size(rng, a["min_size"], a["max_size"])
        img = make_image(rng, palette, w, h)
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=a["quality"], subsampling=2)
        with open(os.path.join(cdir, "%s_%05d.jpg" % (class_name(c), i)), "wb") as f:
            f.write(buf.getbuffer())
        nbytes += buf.tell()
        npix += w * h
    return count, nbytes, npix


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="See the module docstring (head of this file) for details.")
    p.add_argument("--out", required=True, help="output directory (created)")
    p.add_argument("--classes", type=int, default=100, help="number of classes (default: 100)")
    p.add_argument("--train-per-class", type=int, default=100, help="default: 100")
    p.add_argument("--val-per-class", type=int, default=10, help="default: 10")
    p.add_argument("--min-size", type=int, default=224, help="smallest side (default: 224)")
    p.add_argument("--max-size", type=int, default=500, help="largest side (default: 500)")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality (default: 90)")
    p.add_argument("--seed", type=int, default=0, help="default: 0")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="processes (default: all CPUs, %(default)s here)")
    p.add_argument("--overwrite", action="store_true",
                   help="delete OUT/train and OUT/val first if they exist")
    args = p.parse_args()

    if args.classes < 1 or args.train_per_class < 0 or args.val_per_class < 0:
        fail("--classes must be at least 1 and the per-class counts not negative")
    if not 16 <= args.min_size <= args.max_size:
        fail("need 16 <= --min-size <= --max-size")
    if not 1 <= args.quality <= 100:
        fail("--quality must be in 1..100")
    if args.workers < 1:
        fail("--workers must be at least 1")
    if args.seed < 0:
        fail("--seed must not be negative")
    for split, _ in SPLITS:
        d = os.path.join(args.out, split)
        if os.path.exists(d):
            if not args.overwrite:
                fail("%s already exists (use --overwrite to replace it)" % d)
            shutil.rmtree(d)

    a = {"seed": args.seed, "min_size": args.min_size, "max_size": args.max_size,
         "quality": args.quality}
    tasks = []
    for split, split_id in SPLITS:
        count = args.train_per_class if split == "train" else args.val_per_class
        for c in range(args.classes):
            os.makedirs(os.path.join(args.out, split, class_name(c)), exist_ok=True)
            if count:
                tasks.append((args.out, split, split_id, c, count, a))
    total = args.classes * (args.train_per_class + args.val_per_class)

    t0 = time.time()
    done = nbytes = npix = 0
    for n, b, px in run_tasks(_write_class, tasks, args.workers, total, t0):
        done += n
        nbytes += b
        npix += px

    dt = time.time() - t0
    n = max(done, 1)
    progress("done: %d images, %.1f MB, average file %.1f KB, average image %.0f pixels "
             "(%.1f KB per 500x375 at this bytes/pixel), %.1f s (%d workers) -> %s"
             % (done, nbytes / 1e6, nbytes / n / 1e3, npix / n,
                nbytes / max(npix, 1) * 500 * 375 / 1e3, dt, args.workers, args.out))


if __name__ == "__main__":
    main()
