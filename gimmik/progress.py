"""Progress reporting of the tuner and the sweep, below the command line:
the interface sweep() reports through (SweepProgress, silent) and the
terminal bars the commands pass in (TuneBar, SweepBar)."""

import sys

# Error text prefix of a sweep row left out on purpose (e.g. --max-nnz)
SKIPPED = 'skipped'


def summary(row):
    """One line about a sweep row, for progress output."""
    if row['error'].startswith(SKIPPED):
        return row['error']
    if row['error']:
        return f'error: {row["error"][:100]}'
    vs = f'{row["speedup"]:.2f}x vendor' if row['speedup'] else 'no vendor'
    frac = (f'{100*row["copy_fraction"]:.0f}% copy'
            if row['copy_fraction'] else '')
    # the verdict where the vendor wins, so that no one misses it
    return (f'{row["candidate"]:<28s} {row["gbps"]:8.2f} GB/s {frac} '
            f'{vs}' + ('  -> USE VENDOR' if row.get('use_vendor') else ''))


class SweepProgress:
    """What sweep() reports as it goes; every method does nothing here.  The
    command line shows a progress bar through a subclass (SweepBar)."""

    def begin(self, todo, total, csv_path):
        """`todo` of `total` operators are to be tuned into csv_path."""

    def start(self, name):
        """Tuning operator `name` begins."""

    def step(self, done, total, variant):
        """The tuner's progress within the operator (tune()'s callback)."""

    def finish(self, name, row):
        """Operator `name` is done; `row` is its table row."""

    def stopped(self, name, budget_s):
        """The budget of `budget_s` seconds is spent: `name` and the
        operators after it are left for the next run."""

    def close(self):
        """The sweep ends (also when interrupted)."""


def _tqdm(stream, quiet=False, **kw):
    """A tqdm bar on a terminal stream (disabled elsewhere or when quiet)."""
    from tqdm import tqdm
    tty = hasattr(stream, 'isatty') and stream.isatty()
    return tqdm(file=stream, dynamic_ncols=True, leave=False,
                disable=quiet or not tty, **kw)


class TuneBar:
    """The progress bar of `gimmik tune` on a terminal (nothing elsewhere);
    update() is tune()'s progress callback."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.bar = _tqdm(self.stream, unit='candidate')

    def update(self, done, total, label):
        self.bar.total = max(total or done, done)
        self.bar.n = done
        self.bar.set_postfix_str(label[:40], refresh=False)
        self.bar.refresh()

    def close(self):
        self.bar.close()


class SweepBar(SweepProgress):
    """`gimmik sweep`'s progress: a bar over the operators (and the current
    operator's candidates) on a terminal, one line per finished operator,
    and nothing with quiet."""

    def __init__(self, stream=None, quiet=False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.bar = None
        self.done = 0
        self.stopped_before = None   # the operator a spent budget stopped at

    def begin(self, todo, total, csv_path):
        self.total = todo
        if not self.quiet and todo < total:
            self._line(f'resuming: {total - todo} of {total} operators '
                       f'already done in {csv_path}')
        self.bar = _tqdm(self.stream, self.quiet, total=todo, unit='op')

    def start(self, name):
        self.name = name
        self.bar.set_description(name, refresh=True)

    def step(self, done, total, variant):
        self.bar.set_postfix_str(f'candidate {done}/{total} {variant}'[:60])

    def finish(self, name, row):
        self.done += 1
        self.bar.update(1)
        if not self.quiet:
            self._line(f'{self.done:4d}/{self.total} {name:<16s} '
                       f'{summary(row)}')

    def stopped(self, name, budget_s):
        self.stopped_before = name
        self._line(f'budget of {budget_s:g} s spent: stopping before {name}; '
                   'run the same command again to go on')

    def close(self):
        if self.bar is not None:
            self.bar.close()

    def _line(self, text):
        from tqdm import tqdm
        tqdm.write(text, file=self.stream)
