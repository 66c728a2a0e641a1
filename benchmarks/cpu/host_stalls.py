#!/usr/bin/env python3
"""Does this machine itself stall a running thread? A spin loop that only reads clocks, so any
gap in it is not the program's work: each wall-clock gap over --gap-ms is printed with the
thread's CPU time and run-queue wait across it (/proc/thread-self/schedstat).

  waiting ~ gap  another process or cgroup had the CPU (the guest's scheduler);
  cpu ~ gap, or neither moved: the thread "ran" but did nothing, so the virtual machine's host
                 took the vCPU away (a VM whose host reports no steal time books it as CPU time).

--churn-gb first runs a process that touches that many GB and exits, as a benchmark's peer (a
Python process with PyTorch) does: on the 2-core VM of issue 39, the host then stalled the guest
in 100 ms steps for a minute (benchmarks/RESULTS.md). Run it as the benchmark runs, e.g. inside
the same CPU quota beside the same busy process, to tell the machine's stalls from Convoy's.

  python3 benchmarks/cpu/host_stalls.py --seconds 60 [--churn-gb 1]
"""
import argparse
import subprocess
import sys
import time


def run_queue_wait():
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) * 1e-9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--gap-ms", type=float, default=10)
    ap.add_argument("--churn-gb", type=float, default=0)
    args = ap.parse_args()
    if args.churn_gb > 0:
        touch = f"b = bytearray(int({args.churn_gb} * 2**30))\nfor i in range(0, len(b), 4096): b[i] = 1\n"
        subprocess.run([sys.executable, "-c", touch], check=True)
    thread_cpu = lambda: time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)  # noqa: E731
    start = last = time.monotonic()
    last_cpu, last_wait = thread_cpu(), run_queue_wait()
    bar = args.gap_ms * 1e-3
    gaps, stalled = 0, 0.0
    while last - start < args.seconds:
        now, cpu = time.monotonic(), thread_cpu()
        if now - last > bar:
            wait = run_queue_wait()
            gaps += 1
            stalled += now - last
            print(f"gap {1e3 * (now - last):.1f} ms at {now - start:.1f} s: cpu {1e3 * (cpu - last_cpu):.1f} ms, "
                  f"waiting {1e3 * (wait - last_wait):.1f} ms", flush=True)
            last_wait = wait
        elif int(now * 100) != int(last * 100):  # the wait's books, every 10 ms
            last_wait = run_queue_wait()
        last, last_cpu = now, cpu
    print(f"{gaps} gaps over {args.gap_ms:g} ms in {args.seconds:g} s, {1e3 * stalled:.0f} ms in all")


if __name__ == "__main__":
    main()
