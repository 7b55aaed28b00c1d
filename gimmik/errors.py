"""gimmik's own exception types, in a module that imports nothing of
gimmik so that every layer can raise and catch them."""


class RuntimeUnavailable(RuntimeError):
    """The platform cannot run here; the message says what is missing."""


class MissingExtra(RuntimeUnavailable, ImportError):
    """A package that only an optional extra installs is missing (message
    names `package` and `extra`); a RuntimeUnavailable and an ImportError."""

    def __init__(self, package, extra, needed_by, reason=''):
        self.package, self.extra = package, extra
        why = f' ({reason})' if reason else ''
        super().__init__(f'{needed_by} needs {package}, which is not '
                         f'installed{why}; install it with '
                         f"pip install 'gimmik[{extra}]'")


class EnvironmentFault(RuntimeError):
    """Something outside the kernels failed while tuning (a full disk, a
    broken toolchain, a timer too coarse to rank): the run has no verdict,
    and nothing is cached."""
