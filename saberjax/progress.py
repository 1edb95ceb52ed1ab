"""Progress lines of a training run, one every N iterations and one after the last.

    iteration 20/100: 5.31 Mtoken/s, ETA 6 s, held-out log-likelihood -7.8865 (iteration 20)

Mtoken/s is over the iterations since the previous line, the ETA extrapolates their mean time
to the iterations left, and the held-out score is the latest one training computed.  A
`Progress` is a training callback (trainer.train's `callback(iteration, metrics, state)`);
`chain` runs it beside the user's own.
"""

from __future__ import annotations

from collections.abc import Callable

Callback = Callable[[int, dict, object], "bool | None"]


class Progress:
    """Training callback writing a progress line with `log` every `every` iterations and
    after the last of `iterations`; never stops training."""

    def __init__(self, iterations: int, every: int = 10, log: Callable[[str], None] = print):
        if every < 1:
            raise ValueError(f"progress lines every {every} iterations: it must be at least 1")
        self.iterations, self.every, self.log = iterations, every, log
        self._score: tuple[int, float] | None = None
        self._start_window()

    def __call__(self, iteration: int, record: dict, state=None) -> None:
        self._tokens += record["tokens_per_second"] * record["seconds"]
        self._seconds += record["seconds"]
        self._window_iterations += 1
        if "heldout_loglik_per_token" in record:
            self._score = (iteration, record["heldout_loglik_per_token"])
        if iteration % self.every and iteration != self.iterations:
            return
        self.log(self.line(iteration))
        self._start_window()

    def _start_window(self) -> None:
        self._tokens = self._seconds = 0.0
        self._window_iterations = 0

    def line(self, iteration: int) -> str:
        """The progress line at `iteration` from the records since the previous line."""
        seconds_each = self._seconds / max(self._window_iterations, 1)
        eta = seconds_each * max(self.iterations - iteration, 0)
        rate = self._tokens / self._seconds / 1e6 if self._seconds > 0 else float("nan")
        score = (f", held-out log-likelihood {self._score[1]:.4f} (iteration {self._score[0]})"
                 if self._score else "")
        return f"iteration {iteration}/{self.iterations}: {rate:.2f} Mtoken/s, ETA " \
               f"{_duration(eta)}{score}"


TIME_PHASES = ("load", "layout", "transfer", "init", "compile", "training", "evaluation",
               "save")


def time_line(phases: dict[str, float], init: float, compile: float, iterations: float,
              total: float) -> str:
    """The training log's last line, where the time went:

        time: load 0.16 s, layout 0.95 s, transfer 0.08 s, init 0.41 s, compile 1.20 s,
        training 3.10 s, evaluation 0.35 s, save 1.02 s (total 7.52 s)

    `phases` are a run's timing.Phases seconds, with "training" the trainer.train call (less
    the layout and evaluation inside it), which is split into the trainer's own figures: init
    (initialising or loading the checkpoint, its compilation included), compile (the
    iteration), training (`iterations`: the seconds of this run's iterations, as in
    metrics.jsonl) and transfer: a "transfer" phase where the library marks one, plus the
    rest of the call, chiefly the corpus put on the devices and the model fetched back (and
    any checkpoints).  evaluation is held-out scoring and any
    other fold-in of documents (train.py --save_doc_topics).  total: the wall time it all
    came from.
    """
    rest = max(0.0, phases.get("training", 0.0) - init - compile - iterations)
    seconds = dict(phases, init=init, compile=compile, training=iterations,
                   transfer=phases.get("transfer", 0.0) + rest)
    shown = ", ".join(f"{name} {seconds.get(name, 0.0):.2f} s" for name in TIME_PHASES)
    return f"time: {shown} (total {total:.2f} s)"


def memory_line(peak_rss: dict[str, int], total: int) -> str:
    """The training log's line of where host memory went: the process's peak resident memory
    at the end of each phase of a run (timing.Phases.peak_rss, bytes) and at the end of it
    all (`total`), in GB:

        peak RSS after load 5.10 GB, layout 5.31 GB, training 6.02 GB, save 6.02 GB (run 6.02 GB)
    """
    shown = ", ".join(f"{name} {peak_rss[name] / 1e9:.2f} GB" for name in TIME_PHASES
                      if name in peak_rss)
    return f"peak RSS after {shown} (run {total / 1e9:.2f} GB)"


def chain(*callbacks: Callback | None) -> Callback:
    """One callback calling each given one in turn; it stops training when any of them asks."""
    present = [callback for callback in callbacks if callback is not None]

    def chained(iteration, record, state):
        stop = False
        for callback in present:
            stop = bool(callback(iteration, record, state)) or stop
        return stop
    return chained


def _duration(seconds: float) -> str:
    """'42 s', '3 min 05 s', '2 h 07 min'."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
