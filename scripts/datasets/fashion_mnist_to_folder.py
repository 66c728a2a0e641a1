#!/usr/bin/env python3
"""Fashion-MNIST (IDX files) -> an image folder in torchvision's ImageFolder layout.

Makes a real, learnable image dataset on disk without network access, for Convoy's image
loader tests, data-loading benchmarks and an accuracy run against PyTorch on the same files:

    OUT/train/<class>/<index>.jpg     60,000 images (Fashion-MNIST "train")
    OUT/val/<class>/<index>.jpg       10,000 images (Fashion-MNIST "t10k")
    OUT/train.csv, OUT/val.csv        only with --csv: "path,label" rows, path relative to the
                                      csv, label = the class directory name

Class directories are "<label>_<name>": 0_t-shirt_top 1_trouser 2_pullover 3_dress 4_coat
5_sandal 6_shirt 7_sneaker 8_bag 9_ankle_boot. Sorting the names, as ImageFolder does, gives
labels 0..9 in Fashion-MNIST's order. <index> is the image's position in its IDX file, zero
padded to 5 digits, so sorted file names keep the original order.

Images are resized from 28x28 to --size (bicubic). With --color (the default) each image is
coloured: the garment gets a random colour and the background another clearly different one,
drawn per image from (--seed, split, index), so the colours are the same for any --workers and
tell nothing about the label. --gray keeps the grey images (one channel).

The output is deterministic for a given --seed on one machine (same Pillow/libjpeg build);
another libjpeg may encode the same pixels to different bytes.

Example:
    scripts/datasets/fashion_mnist_to_folder.py --out /tmp/fmnist64 --workers 16 --csv
    scripts/datasets/fashion_mnist_to_folder.py --out /tmp/fmnist-ci --train-limit 2000 \\
        --test-limit 500 --size 32
"""

import argparse
import io
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fmnist  # noqa: E402
from _fmnist import np  # noqa: E402
from _common import fail, progress, run_tasks  # noqa: E402

try:
    from PIL import Image
except ImportError:  # pragma: no cover - depends on the machine
    fail("Pillow is not installed for %s (Debian: apt-get install python3-pil)" % sys.executable)

BICUBIC = getattr(Image, "Resampling", Image).BICUBIC

SPLITS = [("train", "train"), ("t10k", "val")]  # (IDX prefix, output directory)

CHUNK = 500  # images per task handed to a worker


def _write_chunk(task):
    """Worker: colour, resize and save one chunk of images; returns the bytes written."""
    (images, labels, start, out_dir, split_id, args) = task
    n = images.shape[0]
    indices = np.arange(start, start + n)
    if args["gray"]:
        pixels = images
    else:
        pixels = _fmnist.colourize(images, args["seed"], split_id, indices)
    ext = args["format"]
    total = 0
    for i in range(n):
        img = Image.fromarray(np.ascontiguousarray(pixels[i]))  # uint8: L or RGB by shape
        if args["size"] != img.width:
            img = img.resize((args["size"], args["size"]), BICUBIC)
        path = os.path.join(out_dir, _fmnist.CLASS_DIRS[labels[i]], "%05d.%s" % (start + i, ext))
        buf = io.BytesIO()
        if ext == "jpg":
            img.save(buf, "JPEG", quality=args["quality"])
        else:
            img.save(buf, "PNG")
        # Encode in memory, then one plain write (which also gives the size without a stat).
        with open(path, "wb") as f:
            f.write(buf.getbuffer())
        total += buf.tell()
    return n, total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="See the module docstring (head of this file) for the layout.")
    p.add_argument("--out", required=True, help="output directory (created)")
    p.add_argument("--input-dir", default=_fmnist.DEFAULT_DIR,
                   help="directory with the four Fashion-MNIST IDX files, .gz or plain "
                        "(default: %(default)s)")
    p.add_argument("--size", type=int, default=64, help="output width and height (default: 64)")
    col = p.add_mutually_exclusive_group()
    col.add_argument("--color", dest="gray", action="store_false",
                     help="colour each image deterministically (the default)")
    col.add_argument("--gray", dest="gray", action="store_true",
                     help="keep the grey images (one channel)")
    p.set_defaults(gray=False)
    p.add_argument("--format", choices=["jpg", "png"], default="jpg", help="default: jpg")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality (default: 90)")
    p.add_argument("--train-limit", type=int, default=None, metavar="N",
                   help="only the first N training images")
    p.add_argument("--test-limit", type=int, default=None, metavar="N",
                   help="only the first N test (val) images")
    p.add_argument("--csv", action="store_true", help="also write OUT/train.csv and OUT/val.csv")
    p.add_argument("--seed", type=int, default=0, help="colour seed (default: 0)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="processes (default: all CPUs, %(default)s here)")
    p.add_argument("--overwrite", action="store_true",
                   help="delete OUT/train and OUT/val first if they exist")
    args = p.parse_args()

    if args.size < 1:
        fail("--size must be at least 1")
    if not 1 <= args.quality <= 100:
        fail("--quality must be in 1..100")
    for name in ("train_limit", "test_limit"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            fail("--%s must not be negative" % name.replace("_", "-"))
    if args.workers < 1:
        fail("--workers must be at least 1")
    if not os.path.isdir(args.input_dir):
        fail("missing input directory: %s" % args.input_dir)

    for _, sub in SPLITS:
        d = os.path.join(args.out, sub)
        if os.path.exists(d):
            if not args.overwrite:
                fail("%s already exists (use --overwrite to replace it)" % d)
            shutil.rmtree(d)

    t0 = time.time()
    data = {}
    for prefix, _ in SPLITS:
        limit = args.train_limit if prefix == "train" else args.test_limit
        data[prefix] = _fmnist.load_split(args.input_dir, prefix, limit)
    progress("read %s in %.1f s" % (", ".join("%s %d" % (k, v[0].shape[0]) for k, v in data.items()),
                                    time.time() - t0))

    wargs = {"gray": args.gray, "seed": args.seed, "size": args.size,
             "format": args.format, "quality": args.quality}
    tasks = []
    for prefix, sub in SPLITS:
        out_dir = os.path.join(args.out, sub)
        for cdir in _fmnist.CLASS_DIRS:
            os.makedirs(os.path.join(out_dir, cdir), exist_ok=True)
        images, labels = data[prefix]
        for start in range(0, images.shape[0], CHUNK):
            tasks.append((images[start:start + CHUNK], labels[start:start + CHUNK], start,
                          out_dir, _fmnist.SPLIT_ID[prefix], wargs))

    total_images = sum(v[0].shape[0] for v in data.values())
    done = nbytes = 0
    for n, b in run_tasks(_write_chunk, tasks, args.workers, total_images, t0):
        done += n
        nbytes += b

    if args.csv:
        for prefix, sub in SPLITS:
            path = os.path.join(args.out, sub + ".csv")
            _, labels = data[prefix]
            with open(path, "w") as f:
                f.write("path,label\n")
                for i, lab in enumerate(labels):
                    cdir = _fmnist.CLASS_DIRS[lab]
                    f.write("%s/%s/%05d.%s,%s\n" % (sub, cdir, i, args.format, cdir))
            progress("wrote %s" % path)

    dt = time.time() - t0
    progress("done: %d images, %.1f MB, average %.0f bytes, %.1f s (%d workers) -> %s"
             % (total_images, nbytes / 1e6, nbytes / max(total_images, 1), dt, args.workers, args.out))


if __name__ == "__main__":
    main()
