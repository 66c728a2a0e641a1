"""What every dataset script in this folder shares (not a script; imported as `_common`).

  * fail(): one-line error to stderr, exit 1.
  * progress(): a line on stderr, flushed.
  * run_tasks(): a function over tasks in worker processes (or in this one with one worker),
    with a progress line every two seconds.
"""

import multiprocessing
import sys
import time


def fail(msg):
    sys.stderr.write("error: %s\n" % msg)
    sys.exit(1)


def progress(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def run_tasks(work, tasks, workers, total, t0):
    """Yields work(task) for every task, in any order; each result's first element is the number
    of images that task wrote, which drives the progress line (`total` images in all)."""
    pool = None
    if workers == 1:
        results = map(work, tasks)
    else:
        pool = multiprocessing.Pool(workers)
        results = pool.imap_unordered(work, tasks)
    done = 0
    last = 0.0
    try:
        for result in results:
            done += result[0]
            now = time.time()
            if now - last >= 2.0 or done == total:
                last = now
                progress("  %d/%d images, %.1f s" % (done, total, now - t0))
            yield result
    finally:
        if pool is not None:
            pool.close()
            pool.join()
