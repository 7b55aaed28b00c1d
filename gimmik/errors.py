"""gimmik's own exception types, in a module that imports nothing of
gimmik so that every layer can raise and catch them."""


class RuntimeUnavailable(RuntimeError):
    """The platform cannot run here; the message says what is missing."""


class EnvironmentFault(RuntimeError):
    """Something outside the kernels failed while tuning (a full disk, a
    broken toolchain, a timer too coarse to rank): the run has no verdict,
    and nothing is cached."""
