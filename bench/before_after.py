"""bench/before_after.py: the table of bench/before_after.sh.

For every cell (workload, variant, clients) of the runs, queue's median
over the run's repetitions divided by the baseline's median in the same run;
one column per run, before and after interleaved as they ran, and the
change of the median ratio.  Usage: before_after.py RESULTS BEFORE AFTER
label=run ...
"""
import csv
import statistics
import sys
from collections import defaultdict

results, before_desc, after_desc = sys.argv[1:4]
runs = [a.split('=', 1) for a in sys.argv[4:]]
WORKLOADS = ('enqueue', 'bulk', 'drain')


def medians(run):
    cells = defaultdict(list)
    with open(f'{results}/{run}/raw.csv') as f:
        for r in csv.DictReader(f):
            if r['metric'] == 'throughput' and r['workload'] in WORKLOADS and r['value']:
                cells[(r['workload'], r['variant'], r['clients'], r['metric'], r['system'])].append(float(r['value']))
    return {k: statistics.median(v) for k, v in cells.items()}


ratios = []
for label, run in runs:
    m = medians(run)
    ratio = {}
    for (w, v, c, metric, system), value in m.items():
        base = m.get((w, v, c, metric, 'baseline'))
        if system == 'queue' and base:
            ratio[(w, v, c, metric)] = value / base
    ratios.append((label, run, ratio))

cells = sorted(set().union(*[r[2].keys() for r in ratios]))
print(f'# Before and after: queue / baseline, per run\n')
print(f'before: {before_desc}; after: {after_desc}.  Runs, in the order they ran: ' +
      ', '.join(f'{label} [{run}]({run}/report.md)' for label, run, _ in ratios) + '.\n')
print('Throughput (jobs/s) of queue divided by the baseline\'s in the same run: above 1, queue is ahead.\n')
header = ['workload', 'clients'] + [f'{label} {i // 2 + 1}' for i, (label, _, _) in enumerate(ratios)] + \
    ['before (median)', 'after (median)', 'after / before']
print('| ' + ' | '.join(header) + ' |')
print('|' + '---|' * len(header))
for cell in cells:
    w, v, c, metric = cell
    row = [f'{w}: {v}', c]
    b = [r[2][cell] for r in ratios if r[0] == 'before' and cell in r[2]]
    a = [r[2][cell] for r in ratios if r[0] == 'after' and cell in r[2]]
    row += [f'{r[2][cell]:.2f}' if cell in r[2] else '' for r in ratios]
    mb = statistics.median(b) if b else None
    ma = statistics.median(a) if a else None
    row += [f'{mb:.2f}' if mb else '', f'{ma:.2f}' if ma else '',
            f'{ma / mb:.2f}' if mb and ma else '']
    print('| ' + ' | '.join(row) + ' |')
