"""The `gimmik` command.  Each sub-command lives in the module that does the
work; that module provides `add_arguments(parser)` and `run(args)`."""

import argparse
import importlib
import sys
import warnings

from gimmik.sweep import SweepProgress, summary

SUBCOMMANDS = {
    'isa': ('gimmik.isa', 'ISA report of every candidate for AMD GPUs'),
    'tune': ('gimmik.tune', 'autotune one operator against the vendor BLAS'),
    'sweep': ('gimmik.sweep', 'autotune a whole operator suite'),
    'report': ('gimmik.report', 'summarise a sweep as Markdown and plots'),
}


def main(argv=None):
    ap = argparse.ArgumentParser(prog='gimmik', description=__doc__)
    sub = ap.add_subparsers(dest='command', required=True)
    for name, (modname, helptext) in SUBCOMMANDS.items():
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if e.name != modname:
                raise
            continue
        p = sub.add_parser(name, help=helptext, description=helptext)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)

    args = ap.parse_args(argv)
    try:
        with warnings.catch_warnings():
            # a warning is one line on stderr that names the command
            def show(message, *rest, **kw):
                print(f'gimmik {args.command}: warning: {message}',
                      file=sys.stderr)
            warnings.showwarning = show
            return args.func(args) or 0
    except (ValueError, TypeError, RuntimeError, OSError) as e:
        print(f'gimmik {args.command}: error: {e}', file=sys.stderr)
        return 2
    except MemoryError:
        print(f'gimmik {args.command}: error: out of memory (try a smaller '
              f'--n)', file=sys.stderr)
        return 2


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
        self._line(f'budget of {budget_s:g} s spent: stopping before {name}; '
                   'run the same command again to go on')

    def close(self):
        if self.bar is not None:
            self.bar.close()

    def _line(self, text):
        from tqdm import tqdm
        tqdm.write(text, file=self.stream)


if __name__ == '__main__':
    sys.exit(main())
