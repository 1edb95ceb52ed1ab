"""The error of malformed input, apart from the modules that read input (corpus, text), so
that neither has to import the other for it, and the one line a file that cannot be read
gives (read_errors)."""

import contextlib
from collections.abc import Iterator


class CorpusFormatError(ValueError):
    """Malformed corpus input; the message names the file and 1-based line (or value) at fault."""


@contextlib.contextmanager
def read_errors(path) -> Iterator[None]:
    """An OSError reading the file `path` within, as the one-line CorpusFormatError naming it:
    "file not found", else "cannot read" and the system's reason."""
    try:
        yield
    except FileNotFoundError:
        raise CorpusFormatError(f"{path}: file not found") from None
    except OSError as error:
        raise CorpusFormatError(f"{path}: cannot read: {error.strerror or error}") from error
