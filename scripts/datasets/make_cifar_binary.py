#!/usr/bin/env python3
"""A CIFAR-10 / CIFAR-100 *binary version* stand-in made from Fashion-MNIST.

Real CIFAR cannot be downloaded here (no network), so this writes files in CIFAR's official
binary format, with CIFAR's file names and record counts, holding Fashion-MNIST images instead:
a real, learnable 10-class dataset for tests and CI of a CIFAR reader. It has CIFAR's format,
not CIFAR's content: accuracies on it say nothing about CIFAR.

Images: Fashion-MNIST 28x28 grey, resized to 32x32 (bicubic) and coloured exactly as
fashion_mnist_to_folder.py --color does (same colours for the same --seed and image index).
Training records are the first 50,000 Fashion-MNIST training images (CIFAR's count; the last
10,000 are left out), in file order; test records are the 10,000 t10k images.

--kind cifar10 writes OUT/cifar-10-batches-bin/:
    data_batch_1.bin ... data_batch_5.bin   10,000 records each, in order
    test_batch.bin                          10,000 records
    batches.meta.txt                        the 10 class names, one a line (label order)
  record = 1 label byte (0..9) + 3072 bytes: 1024 R, 1024 G, 1024 B, each 32x32 row-major
  (3073 bytes). With --train-limit N the records fill data_batch_1 first, then _2, ...; all
  five files are always written, later ones possibly empty.

--kind cifar100 writes OUT/cifar-100-binary/:
    train.bin (50,000 records), test.bin (10,000), fine_label_names.txt (100 lines),
    coarse_label_names.txt (20 lines)
  record = coarse label byte + fine label byte + the same 3072 bytes (3074 bytes).
  The 10 Fashion-MNIST classes are fine labels 0..9 (fine labels 10..99 are never used and
  named unused_10 ... unused_99); coarse label = fine label // 5, so coarse 0 = classes 0-4
  (t-shirt_top trouser pullover dress coat), coarse 1 = classes 5-9 (sandal shirt sneaker bag
  ankle_boot); coarse 2..19 unused.

Fashion-MNIST's label order: 0 t-shirt_top, 1 trouser, 2 pullover, 3 dress, 4 coat, 5 sandal,
6 shirt, 7 sneaker, 8 bag, 9 ankle_boot.

Deterministic for a given --seed (same Pillow build for the resize).

Example:
    scripts/datasets/make_cifar_binary.py --out /tmp/cifar --kind cifar10
    scripts/datasets/make_cifar_binary.py --out /tmp/cifar --kind cifar100 --train-limit 2000 \\
        --test-limit 500
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fmnist  # noqa: E402
from _fmnist import np  # noqa: E402
from _common import fail, progress  # noqa: E402

try:
    from PIL import Image
except ImportError:  # pragma: no cover - depends on the machine
    fail("Pillow is not installed for %s (Debian: apt-get install python3-pil)" % sys.executable)

BICUBIC = getattr(Image, "Resampling", Image).BICUBIC

TRAIN_COUNT = 50000
TEST_COUNT = 10000
BATCH = 10000  # records per CIFAR-10 data_batch file


def to_planes(images, seed, split_id, gray):
    """[n,28,28] grey -> [n,3072] uint8: R plane, G plane, B plane of the 32x32 image."""
    n = images.shape[0]
    if gray:
        rgb = np.repeat(images[..., None], 3, axis=-1)
    else:
        rgb = _fmnist.colourize(images, seed, split_id, np.arange(n))
    out = np.empty((n, 3, 32, 32), dtype=np.uint8)
    for i in range(n):
        img = Image.fromarray(rgb[i]).resize((32, 32), BICUBIC)
        out[i] = np.asarray(img).transpose(2, 0, 1)
    return out.reshape(n, 3072)


def write_records(path, labels_cols, planes):
    """One file of records: the label bytes (columns of labels_cols) then the 3072 pixel bytes."""
    rec = np.concatenate([labels_cols.astype(np.uint8), planes], axis=1)
    with open(path, "wb") as f:
        f.write(rec.tobytes())
    progress("wrote %s (%d records of %d bytes)" % (path, rec.shape[0], rec.shape[1]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="See the module docstring (head of this file) for the format.")
    p.add_argument("--out", required=True, help="output directory (the CIFAR folder goes inside)")
    p.add_argument("--kind", choices=["cifar10", "cifar100"], default="cifar10",
                   help="default: cifar10")
    p.add_argument("--input-dir", default=_fmnist.DEFAULT_DIR,
                   help="directory with the four Fashion-MNIST IDX files, .gz or plain "
                        "(default: %(default)s)")
    p.add_argument("--train-limit", type=int, default=TRAIN_COUNT, metavar="N",
                   help="first N training images (at most and default %d)" % TRAIN_COUNT)
    p.add_argument("--test-limit", type=int, default=TEST_COUNT, metavar="N",
                   help="first N test images (at most and default %d)" % TEST_COUNT)
    p.add_argument("--gray", action="store_true",
                   help="grey images (R = G = B) instead of coloured ones")
    p.add_argument("--seed", type=int, default=0, help="colour seed (default: 0)")
    args = p.parse_args()

    if not 0 <= args.train_limit <= TRAIN_COUNT:
        fail("--train-limit must be in 0..%d" % TRAIN_COUNT)
    if not 0 <= args.test_limit <= TEST_COUNT:
        fail("--test-limit must be in 0..%d" % TEST_COUNT)
    if not os.path.isdir(args.input_dir):
        fail("missing input directory: %s" % args.input_dir)

    t0 = time.time()
    train_x, train_y = _fmnist.load_split(args.input_dir, "train", args.train_limit)
    test_x, test_y = _fmnist.load_split(args.input_dir, "t10k", args.test_limit)
    progress("read train %d, test %d in %.1f s" % (len(train_y), len(test_y), time.time() - t0))
    train_p = to_planes(train_x, args.seed, _fmnist.SPLIT_ID["train"], args.gray)
    test_p = to_planes(test_x, args.seed, _fmnist.SPLIT_ID["t10k"], args.gray)
    progress("resized and coloured in %.1f s" % (time.time() - t0))

    if args.kind == "cifar10":
        d = os.path.join(args.out, "cifar-10-batches-bin")
        os.makedirs(d, exist_ok=True)
        for b in range(TRAIN_COUNT // BATCH):
            s = slice(b * BATCH, (b + 1) * BATCH)
            write_records(os.path.join(d, "data_batch_%d.bin" % (b + 1)),
                          train_y[s, None], train_p[s])
        write_records(os.path.join(d, "test_batch.bin"), test_y[:, None], test_p)
        with open(os.path.join(d, "batches.meta.txt"), "w") as f:
            f.write("".join(n + "\n" for n in _fmnist.CLASS_NAMES))
    else:
        d = os.path.join(args.out, "cifar-100-binary")
        os.makedirs(d, exist_ok=True)
        for name, y, planes in (("train.bin", train_y, train_p), ("test.bin", test_y, test_p)):
            write_records(os.path.join(d, name), np.stack([y // 5, y], axis=1), planes)
        fine = _fmnist.CLASS_NAMES + ["unused_%d" % i for i in range(10, 100)]
        coarse = (["fmnist_0_to_4", "fmnist_5_to_9"]
                  + ["unused_coarse_%d" % i for i in range(2, 20)])
        with open(os.path.join(d, "fine_label_names.txt"), "w") as f:
            f.write("".join(n + "\n" for n in fine))
        with open(os.path.join(d, "coarse_label_names.txt"), "w") as f:
            f.write("".join(n + "\n" for n in coarse))
    progress("done in %.1f s -> %s" % (time.time() - t0, d))


if __name__ == "__main__":
    main()
