#!/usr/bin/env python3
"""convoy serve's GPU metrics before, during and after a load run (issue 40's check that they move).
  gpu_metrics.py METRICS_URL [--every S] [--settle S] [--report FILE] -- COMMAND [ARGS...]
Scrapes METRICS_URL (http://HOST:METRICS_PORT/metrics) once, runs COMMAND (its output passes
through) while scraping every S seconds (0.25), waits --settle seconds (3: past the server's
--metrics-interval-ms of 2 s) and scrapes again; then writes per GPU nv_gpu_utilization,
nv_gpu_memory_used_bytes and nv_gpu_power_usage before, during (mean and max) and after, and the
joules nv_energy_consumption counted during the run, to FILE (else to stderr). Exits with COMMAND's
status. Standard library only.
"""
import re
import subprocess
import sys
import time
import urllib.request

SERIES = re.compile(r'^(nv_gpu_utilization|nv_gpu_memory_used_bytes|nv_gpu_memory_total_bytes|nv_gpu_power_usage|'
                    r'nv_energy_consumption)\{gpu_uuid="([^"]*)"\} (\S+)$')


def scrape(url):
    """{(metric, gpu_uuid): value}; empty when the server does not answer."""
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        m = SERIES.match(line)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def main(argv):
    if '--' not in argv or argv.index('--') < 1 or argv.index('--') == len(argv) - 1:
        print(__doc__, file=sys.stderr)
        return 2
    split = argv.index('--')
    options, command = argv[:split], argv[split + 1:]
    url, every, settle, report = options[0], 0.25, 3.0, None
    for flag, value in zip(options[1::2], options[2::2]):
        if flag == '--every':
            every = float(value)
        elif flag == '--settle':
            settle = float(value)
        elif flag == '--report':
            report = value
        else:
            print(f'gpu_metrics.py: unknown option {flag}', file=sys.stderr)
            return 2
    before = scrape(url)
    during = []
    run = subprocess.Popen(command)
    while run.poll() is None:
        time.sleep(every)
        sample = scrape(url)
        if sample:
            during.append(sample)
    time.sleep(settle)
    after = scrape(url)
    gpus = sorted({gpu for (_, gpu) in list(before) + list(after) + [k for s in during for k in s]})
    lines = []
    if not gpus:
        lines.append(f'gpu metrics: no nv_gpu_* series at {url} (no GPU, NVML absent, or --allow-gpu-metrics=false)')
    for gpu in gpus:
        def at(sample, metric):
            return sample.get((metric, gpu))

        def seen(metric):
            return [v for v in (at(s, metric) for s in during) if v is not None]

        def fmt(value, scale=1.0, unit='', digits=2):
            return '-' if value is None else f'{value / scale:.{digits}f}{unit}'

        util, used, power = seen('nv_gpu_utilization'), seen('nv_gpu_memory_used_bytes'), seen('nv_gpu_power_usage')
        mean = lambda v: sum(v) / len(v) if v else None
        energy = seen('nv_energy_consumption')
        joules = energy[-1] - energy[0] if len(energy) > 1 else None
        gib = float(1 << 30)
        lines.append(
            f'gpu {gpu} ({len(during)} scrapes during the run): '
            f'utilization before {fmt(at(before, "nv_gpu_utilization"))}, during mean {fmt(mean(util))} '
            f'max {fmt(max(util) if util else None)}, after {fmt(at(after, "nv_gpu_utilization"))}; '
            f'memory used before {fmt(at(before, "nv_gpu_memory_used_bytes"), gib, " GiB")}, during max '
            f'{fmt(max(used) if used else None, gib, " GiB")}, after {fmt(at(after, "nv_gpu_memory_used_bytes"), gib, " GiB")} '
            f'of {fmt(at(after, "nv_gpu_memory_total_bytes"), gib, " GiB", 0)}; '
            f'power before {fmt(at(before, "nv_gpu_power_usage"), 1, " W", 0)}, during mean {fmt(mean(power), 1, " W", 0)}, '
            f'after {fmt(at(after, "nv_gpu_power_usage"), 1, " W", 0)}; energy during {fmt(joules, 1, " J", 0)}')
    text = '\n'.join(lines) + '\n'
    if report:
        with open(report, 'w') as f:
            f.write(text)
    else:
        sys.stderr.write(text)
    return run.returncode


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
