"""Types of the CPU target's native grid runner (``_cpugrid.c``)."""

def symbols() -> dict[str, int]:
    """The addresses of the functions compiled kernels call, by name."""

def last_error() -> str:
    """The message of this thread's last failed grid."""
