"""The `gimmik` command.  Each sub-command lives in the module that does the
work; that module provides `add_arguments(parser)` and `run(args)`."""

import argparse
import importlib
import os
import sys
import warnings

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
            rc = args.func(args) or 0
            sys.stdout.flush()   # a closed pipe shows here, not at exit
            return rc
    except KeyboardInterrupt:
        print(f'gimmik {args.command}: interrupted', file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of stdout went away (e.g. `| head -1`): nothing left
        # to say, and nothing to flush at exit
        _silence_stdout()
        return 0
    except (ValueError, TypeError, RuntimeError, OSError) as e:
        print(f'gimmik {args.command}: error: {e}', file=sys.stderr)
        return 2
    except MemoryError:
        print(f'gimmik {args.command}: error: out of memory (try a smaller '
              f'--n)', file=sys.stderr)
        return 2


def _silence_stdout():
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == '__main__':
    sys.exit(main())
