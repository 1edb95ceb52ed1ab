"""The error of malformed input, apart from the modules that read input (corpus, text), so
that neither has to import the other for it."""


class CorpusFormatError(ValueError):
    """Malformed corpus input; the message names the file and 1-based line (or value) at fault."""
