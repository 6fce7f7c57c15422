"""Exceptions of drkernel. A bad *solution* is never an exception (it is an `EvalResult` with a
status); an exception means bad input to our own tools or a failure of our own infrastructure.

    DrKernelError
    ├── ConfigError              a config value is unknown, missing or conflicts with another
    ├── ProblemSourceError       a problem source (file, folder, rows) cannot be read
    ├── ProblemNotFoundError     no problem matches an identifier
    ├── InfrastructureError      our own machinery failed (a judge or worker process lost, a pipe broke)
    │   └── JudgeError           the trusted judge could not build or run the reference
    └── ServiceError             the KernelGym service answered with an error (raised by the client)
"""


class DrKernelError(Exception):
    """Base of every drkernel exception."""


class ConfigError(DrKernelError, ValueError):
    """A configuration is invalid: unknown key, missing value or two values in conflict."""


class ProblemSourceError(DrKernelError, ValueError):
    """A problem source cannot be read (missing columns, not JSON, not a KernelBench layout)."""


class ProblemNotFoundError(DrKernelError, LookupError):
    """No problem matches the identifier."""


class InfrastructureError(DrKernelError, RuntimeError):
    """Our own infrastructure failed; the evaluation may be retried once."""


class JudgeError(InfrastructureError):
    """The trusted judge could not build or run the reference (a bad problem, not a bad solution)."""


class ServiceError(DrKernelError, RuntimeError):
    """The KernelGym service returned an error status."""
